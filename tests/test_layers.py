"""Imports only run downward and never in a circle: import-linter's contracts (pyproject.toml) hold, and catch an
upward import, a cycle inside a package and the library importing a tool; the house's shape the architecture page
states (the library's floors, the command table's length, module names by role) is the code's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

from conftest import REPO

LINT = Path(sys.executable).with_name("lint-imports")


def lint(package_parent: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(package_parent)}
    return subprocess.run(
        [str(LINT), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=package_parent,
        env=env,
        capture_output=True,
        text=True,
    )


def test_the_layers_hold():
    result = lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    shutil.copytree(REPO / "distalign", tmp_path / "distalign", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "distalign" / "eval" / "bli_metrics.py", "a") as f:
        f.write("\nfrom distalign.train import trainer  # noqa: an upward import\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "distalign.eval.bli_metrics -> distalign.train.trainer" in result.stdout


def test_the_library_importing_a_tool_breaks_the_contract(tmp_path):
    shutil.copytree(REPO / "distalign", tmp_path / "distalign", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "distalign" / "data" / "sampling.py", "a") as f:
        f.write("\nfrom distalign.tools.bench import scale  # noqa: the library importing a tool\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "the library imports no tool BROKEN" in result.stdout
    assert "distalign.data.sampling -> distalign.tools.bench.scale" in result.stdout


def library_floors() -> list[str]:
    """The library's floors, top first: the layers of its import-linter contract in pyproject.toml."""
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c["layers"] for c in contracts if c["name"] == "the library's floors")


def test_the_architecture_page_states_the_library_s_floors_and_the_command_table_s_length():
    page = (REPO / "docs" / "explanations" / "architecture.md").read_text()
    assert f"The library stands on {len(library_floors())} floors" in page
    assert len(library_floors()) <= 9, "issue 48: the library on at most 9 floors"
    lines = len((REPO / "distalign" / "cli.py").read_text().splitlines())
    assert lines <= 200, f"distalign/cli.py has {lines} lines: a command's set-up belongs in its room's cli.py"


# the same role under every folder that has it: a package's files, the plugin folders' base class and registry
# (eval/tasks, transfer/tasks, objectives), a room's command set-up that the command table registers
SAME_ROLE = {"__init__.py", "__main__.py", "base.py", "registry.py", "cli.py"}


def test_no_two_modules_share_a_file_name_unless_they_play_the_same_role():
    names = Counter(path.name for path in (REPO / "distalign").rglob("*.py") if path.name not in SAME_ROLE)
    assert [name for name, count in names.items() if count > 1] == []


def test_a_cycle_inside_a_package_breaks_the_contract(tmp_path):
    """The circle eval/suite.py <-> eval/tasks once had, through a type hint's import: one again is caught."""
    shutil.copytree(REPO / "distalign", tmp_path / "distalign", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "distalign" / "eval" / "tasks" / "xlsim.py", "a") as f:
        f.write("\nif TYPE_CHECKING:\n    from distalign.eval.suite import build_tasks  # noqa: a cycle\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "No cycles are allowed in distalign.eval." in result.stdout
    assert ".tasks -> .suite" in result.stdout


def test_the_driver_and_the_tokenising_code_import_no_model_classes():
    """Start-up (issue 14): transformers' model modules (torch's compiler, DeepSpeed through accelerate) cost
    every process seconds; the driver of a run on a cached model and Ray Data's tokenising tasks never need them."""
    code = (
        "import sys, distalign.cli, distalign.train.trainer, distalign.preparation.ray_streams; "
        "print(sorted(m for m in ('transformers.modeling_utils', 'transformers.activations', 'deepspeed') "
        "if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
