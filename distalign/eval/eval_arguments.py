"""``distalign eval``'s flags: argparse set-up only, from the spec's defaults and the task plugins' own flags
(the task modules import no model library, so building the parser stays fast).
"""

from __future__ import annotations

from distalign.eval.eval_spec import EvalSpec
from distalign.eval.suite_spec import BENCHMARK_DIR_TEXT
from distalign.eval.tasks.base import Flag
from distalign.eval.tasks.registry import EVAL_TASKS


def task_flags() -> list[Flag]:
    """The flags of the registered tasks, each once (word_alignment reads BLI's)."""
    flags = {}
    for plugin in EVAL_TASKS.values():
        flags.update({flag.name: flag for flag in plugin.flags})
    return list(flags.values())


def add_eval_arguments(parser) -> None:
    """``--spec FILE [key=value ...]`` and one flag per common spec key (a flag given wins over the file)."""
    d = EvalSpec()
    parser.add_argument("overrides", nargs="*", help="dotted key=value overrides of the spec (suite.max_queries=100)")
    parser.add_argument("--spec", help="evaluation spec YAML (keys: the fields of distalign.eval.eval_spec.EvalSpec)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--checkpoint",
        help="distalign checkpoint directory (its eval run: a child run of its "
        "training run; --dictionary test sets as its run's in-loop BLI)",
    )
    source.add_argument("--model", help="Hugging Face model directory or hub name (e.g. xlm-roberta-base)")
    parser.add_argument("--eval-dir", help=f"benchmark folder (default {BENCHMARK_DIR_TEXT})")
    parser.add_argument(
        "--tasks",
        help=f"comma list of {','.join(EVAL_TASKS)} (default {','.join(d.suite.tasks)}); "
        "transfer task names (as in distalign transfer) run its protocol first",
    )
    for flag in task_flags():
        default = getattr(d.suite, flag.key.removeprefix("suite."))
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        parser.add_argument(
            flag.name, help=f"{flag.help} (default {shown})" if shown != "" else flag.help, **flag.options
        )
    parser.add_argument(
        "--layer",
        type=int,
        help="score only this layer (negative counts from the last); default: all layers, "
        "MLflow values at each task's best layer",
    )
    parser.add_argument("--output-dir", help="where tables and plots go")
    parser.add_argument("--cache-dir", help="encoding cache (default $DISTALIGN_HOME/.cache/encodings)")
    parser.add_argument(
        "--cpus-per-task", type=float, help=f"CPUs per Ray encoding/scoring task (default {d.cpus_per_task})"
    )
    parser.add_argument("--use-gpu", action="store_true", default=None, help="encode on a GPU per encoding task")
    parser.add_argument(
        "--tracking-uri", help="MLflow store (default $MLFLOW_TRACKING_URI, else sqlite:///$DISTALIGN_HOME/mlflow.db)"
    )
    parser.add_argument(
        "--experiment",
        help=f"experiment of the eval run (default {d.tracking.experiment}; a "
        f"checkpoint of a known training run: that run's experiment)",
    )
    parser.add_argument("--no-mlflow", action="store_true", default=None, help="write files only")
