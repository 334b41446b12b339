"""No random draw in training-side code (objectives, models, train) can land on the wrong device.

Masking and other per-batch randomness is drawn on the data side (``distalign.data.row_random``), so the
training process draws nothing per step. This test fails when a ``torch`` random call appears in those
packages without a ``device=`` (or in-place on an existing tensor, which keeps its device), unless it is
one of the reviewed initialisations listed here. A forward pass on ``meta`` tensors, which the issue
suggests, cannot check this: Hugging Face's SDPA mask code calls ``.item()`` and fails on meta first.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

RANDOM_CALLS = {
    "rand",
    "randn",
    "randint",
    "randperm",
    "bernoulli",
    "multinomial",
    "normal",
    "rand_like",
    "randn_like",
    "randint_like",
    "Generator",
}
# (file, function): reviewed draws made once at construction on the CPU; the state moves to the batch's
# device before use (SenseState.to in SenseAwareObjective.forward)
REVIEWED = {("distalign/objectives/sense_state.py", "__init__")}


def random_calls_without_device(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text())
    name = str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)
    found = []
    for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
        for node in ast.walk(function):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            owner = node.func.value
            if not (isinstance(owner, ast.Name) and owner.id == "torch" and node.func.attr in RANDOM_CALLS):
                continue
            if any(k.arg == "device" for k in node.keywords):
                continue
            if (name, function.name) not in REVIEWED:
                found.append((function.name, node.lineno))
    return found


def test_training_side_random_draws_take_their_device_from_the_inputs():
    offenders = {
        str(p.relative_to(REPO)): calls
        for package in ("objectives", "models", "train")
        for p in sorted((REPO / "distalign" / package).rglob("*.py"))
        if (calls := random_calls_without_device(p))
    }
    assert offenders == {}


def test_the_scan_finds_a_draw_without_a_device(tmp_path):
    source = tmp_path / "probe.py"
    source.write_text(
        "import torch\n\ndef noise(x):\n    return x + torch.randn(x.shape)\n\n"
        "def fine(x):\n    return x + torch.randn(x.shape, device=x.device)\n"
    )
    assert random_calls_without_device(source) == [("noise", 4)]
