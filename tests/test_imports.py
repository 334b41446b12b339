"""Which heavy libraries each ``distalign`` command loads before it runs: its parser set up (``distalign CMD --help``)
and the modules its handler imports, in a fresh interpreter per command. A command that needs no cluster must not
pay for Ray's import (nor ``--help`` for anything): the table below is what each command may load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("ray", "wordfreq", "deepspeed", "mlflow", "torch", "transformers", "datasets", "lang2vec")
CLUSTER = {"ray", "torch", "transformers", "mlflow"}  # the commands that start or join a Ray cluster

# command line -> (the modules its handler in distalign.cli imports, the heavy libraries they may load). Loaded
# later, by the command's run: Ray by eval (its scoring tasks) and transfer (Ray Train), transformers with a
# model, MLflow when a run is logged, DeepSpeed by train.engine=deepspeed, wordfreq where words are excluded.
COMMANDS = {
    "--help": ((), set()),
    "train": (("distalign.train.startup", "distalign.train.trainer", "distalign.transfer.training"), CLUSTER),
    "tune": (("distalign.studies", "distalign.synthetic_languages.tune_studies"), CLUSTER),
    "bench synthetic": (("distalign.synthetic_languages.benchmark",), CLUSTER),
    "bench streaming": (("distalign.tools.bench.streaming",), CLUSTER),
    "eval": (("distalign.eval.checkpoint_eval", "distalign.transfer.zero_shot"), {"torch"}),
    "transfer": (("distalign.transfer.zero_shot",), {"torch"}),
    "bench perf": (("distalign.tools.bench.perf",), {"torch"}),  # --rows gpu --no-mlflow runs without Ray and MLflow
    "static extract": (("distalign.static.x2static",), {"torch", "transformers"}),
    "static align": (("distalign.static.mapping",), {"torch"}),
    "static bli": (("distalign.eval.static_vectors_bli",), {"torch"}),
    "mine-constraints": (("distalign.data.mining", "distalign.data.omw"), {"wordfreq"}),
    # the model's check before torch: an uncached Hub name offline is one line at once (transformers: its tokenizer)
    "model fetch": (("distalign.model_store.model_fetch", "distalign.model_store.locate", "distalign.storage"), set()),
}

PROBE = """
import contextlib, io, json, sys
from distalign import cli
argv, modules, heavy = json.loads(sys.argv[1])
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    cli.main(argv)
for module in modules:
    __import__(module)
print(json.dumps(sorted(name for name in heavy if name in sys.modules)))
"""


def _loaded(command: str, modules: tuple[str, ...], home: Path) -> set[str]:
    argv = command.split() + ([] if command == "--help" else ["--help"])
    env = {**os.environ, "PYTHONPATH": str(REPO), "DISTALIGN_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps([argv, modules, HEAVY])],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{command}: {done.stderr[-2000:]}"
    return set(json.loads(done.stdout.splitlines()[-1]))


@pytest.fixture(scope="module")
def loaded(tmp_path_factory) -> dict[str, set[str]]:
    """command -> the heavy libraries it loaded. One interpreter after the other: side by side they were slower
    here (2 cores; torch's import is CPU-bound)."""
    home = tmp_path_factory.mktemp("home")
    return {command: _loaded(command, modules, home) for command, (modules, _) in COMMANDS.items()}


@pytest.mark.heavy  # a Python process per command (~24 s in all)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_loads_only_the_heavy_libraries_it_needs(loaded, command):
    extra = loaded[command] - COMMANDS[command][1]
    assert not extra, f"`distalign {command}` loads {sorted(extra)} before it runs"


def test_leaving_a_ray_session_that_never_started_imports_no_ray():
    """eval and transfer leave the Ray they started on the way out (``ray_session.leaving_ray``): when they never
    started one (an error before, or nothing to run), finding that out must not import Ray."""
    code = (
        "import sys\nfrom distalign.ray_session import leaving_ray\nwith leaving_ray():\n    pass\n"
        "print('ray' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_running_command_s_parser_is_the_one_the_full_parser_holds():
    """Setting up one command's arguments (the console script's way) gives that command the same help as the
    parser of every command (the reference pages' and the tests'), sub-commands included."""
    from distalign.cli import build_parser

    def helps(parser, prefix=()) -> dict[tuple[str, ...], str]:
        out = {prefix: parser.format_help()}
        for action in parser._subparsers._group_actions if parser._subparsers else ():
            for name, sub in action.choices.items():
                out |= helps(sub, (*prefix, name))
        return out

    full = helps(build_parser())
    for command in ("train", "tune", "eval", "transfer", "mine-constraints", "static", "bench", "model"):
        alone = {key: text for key, text in helps(build_parser(command=command)).items() if key[:1] == (command,)}
        assert alone == {key: text for key, text in full.items() if key[:1] == (command,)}, command
    assert helps(build_parser(command=""))[()] == full[()]  # `distalign --help`: every command listed with its help
