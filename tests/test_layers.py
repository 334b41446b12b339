"""Imports only run downward and never in a circle: import-linter's contracts (pyproject.toml) hold, and catch an
upward import and a cycle inside a package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
    with open(tmp_path / "distalign" / "eval" / "bli.py", "a") as f:
        f.write("\nfrom distalign.train import trainer  # noqa: an upward import\n")
    result = lint(tmp_path)
    assert result.returncode != 0
    assert "distalign.eval.bli_metrics -> distalign.train.trainer" in result.stdout


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
