"""``distalign static bli``'s flags: argparse set-up only (the BLI task's own flags and the benchmark folder's
default), importing no model library."""

from __future__ import annotations

from distalign.eval.suite_spec import BENCHMARK_DIR_TEXT, SuiteSpec
from distalign.eval.tasks.bli import BLITask


def add_static_bli_arguments(parser) -> None:
    """``--vectors LANG=PATH`` (repeatable), ``--output`` and the BLI flags of ``distalign eval``."""
    parser.add_argument(
        "--vectors",
        action="append",
        required=True,
        metavar="LANG=PATH",
        help="word2vec text file (.vec) of a language, repeatable",
    )
    parser.add_argument(
        "--eval-dir", default=SuiteSpec.eval_dir, help=f"benchmark folder of --bli-pairs (default {BENCHMARK_DIR_TEXT})"
    )
    for flag in BLITask.flags:
        parser.add_argument(flag.name, help=flag.help, **flag.options)
    parser.add_argument("--output", default="", help="also write the result rows to this CSV")
