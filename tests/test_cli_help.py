"""The command line's help: fast to print (no heavy library imported to build a parser), and complete."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "pandas", "matplotlib", "ray", "transformers")


def every_command() -> list[list[str]]:
    """Every command and sub-command the parser has (a command added later is covered without a line here)."""
    from distalign.cli import build_parser

    def commands_of(parser, prefix: list[str]) -> list[list[str]]:
        found = [prefix]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found += commands_of(sub, [*prefix, name])
        return found

    return commands_of(build_parser(), [])


def imported_modules(argv: list[str]) -> set[str]:
    """The top-level packages `distalign ARGV --help` imports, from ``python -X importtime``."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "distalign.cli", *argv, "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage: distalign" in done.stdout
    names = re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, flags=re.MULTILINE)
    return {name.split(".")[0] for name in names}


@pytest.mark.parametrize("argv", every_command(), ids=lambda argv: " ".join(argv) or "distalign")
def test_help_imports_no_heavy_library(argv):
    imported = imported_modules(argv)
    assert "distalign" in imported  # the parse saw the imports at all
    assert not imported & set(HEAVY), f"`distalign {' '.join(argv)} --help` imports {sorted(imported & set(HEAVY))}"


def test_transfer_help_names_every_registered_task(capsys):
    from distalign import cli
    from distalign.transfer.tasks.registry import TRANSFER_TASKS

    with pytest.raises(SystemExit):
        cli.main(["transfer", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"Tasks: {', '.join(TRANSFER_TASKS)}." in text
    assert len(TRANSFER_TASKS) == 7


def test_the_task_registry_imports_no_torch():
    """The transfer help's task list comes from the registry: reading it must not load the models' library."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import distalign.transfer.tasks.registry"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert not re.search(r"\|\s*torch$", done.stderr, flags=re.MULTILINE)
