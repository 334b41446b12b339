"""A tensor meets the device of the data it meets, and every collective meets the device of its group.

The first GPU run failed on three lines that every CPU test passed: a CPU tensor all-reduced on an NCCL group
(``train/recipe.py``), a ``torch.eye`` on CPU masking CUDA labels (``bench/bare_loop.py``) and a CPU index
gathering from CUDA similarities (``eval/alignment.py``). On CPU all devices are one, so the class is checked
statically here, and the collectives' device rule under an NCCL-like group.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from conftest import free_port

from distalign import collectives

PACKAGE = Path(__file__).resolve().parents[1] / "distalign"
# torch functions that make a tensor on the default device (CPU) unless given ``device=``
CONSTRUCTORS = {"tensor", "as_tensor", "eye", "arange", "zeros", "ones", "full", "empty", "rand", "randn", "randint",
                "randperm", "linspace", "logspace", "Generator"}
# tensor collectives: only ``distalign/collectives.py`` calls them (object collectives and barrier pick their device)
TENSOR_COLLECTIVES = {"all_reduce", "all_gather", "all_gather_into_tensor", "broadcast", "reduce", "reduce_scatter",
                      "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter"}
HOST_MARK = "host-side"  # in a comment on (or just above) the call's lines, an enclosing ``def``, or "# host-side module"


def _module_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _comment(line: str) -> str:
    return line.split("#", 1)[1] if "#" in line else ""


def unmarked_constructors(path: Path) -> list[str]:
    """``file:line`` of each torch constructor call without ``device=`` that no host-side mark covers."""
    source = path.read_text()
    lines = source.splitlines()
    if any(line.startswith(f"# {HOST_MARK} module") for line in lines):
        return []
    found = []

    def visit(node: ast.AST, marked: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            header = lines[node.lineno - 1: node.body[0].lineno - 1] or [lines[node.lineno - 1]]
            marked = marked or any(HOST_MARK in _comment(line) for line in header)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CONSTRUCTORS
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
                and not any(k.arg == "device" for k in node.keywords) and not marked
                and not any(HOST_MARK in _comment(line) for line in lines[max(node.lineno - 2, 0): node.end_lineno])):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: torch.{node.func.attr}(...)")
        for child in ast.iter_child_nodes(node):
            visit(child, marked)

    visit(ast.parse(source), False)
    return found


def direct_tensor_collectives(path: Path) -> list[str]:
    """``file:line`` of each ``<torch.distributed alias>.<tensor collective>(...)`` call."""
    tree = ast.parse(path.read_text())
    aliases = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names if alias.name in ("torch.distributed", "torch.distributed.nn.functional")}
    aliases |= {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module in ("torch", "torch.distributed", "torch.distributed.nn")
                for alias in node.names if alias.name in ("distributed", "functional")}
    return [f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.func.value.id}.{node.func.attr}(...)"
            for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in TENSOR_COLLECTIVES and isinstance(node.func.value, ast.Name)
            and node.func.value.id in aliases]


def test_every_torch_constructor_names_its_device_or_is_marked_host_side():
    offenders = [hit for path in _module_files() for hit in unmarked_constructors(path)]
    assert not offenders, ("tensors made on the default device (CPU) where a GPU run's data may be on CUDA; pass "
                           "device=<the data's device>, or mark the line or its def '# host-side' with why:\n  "
                           + "\n  ".join(offenders))


def test_only_the_collectives_module_calls_tensor_collectives():
    offenders = [hit for path in _module_files() if path != PACKAGE / "collectives.py"
                 for hit in direct_tensor_collectives(path)]
    assert not offenders, "call distalign.collectives instead (it puts tensors on the group's device):\n  " + \
        "\n  ".join(offenders)


@pytest.mark.parametrize("snippet, expected", [
    ("import torch\nx = torch.eye(3, dtype=torch.bool)\n", 1),
    ("import torch\nx = torch.eye(3, device=y.device)\n", 0),
    ("import torch\nx = torch.zeros(3)  # host-side: built for the data workers\n", 0),
    ("import torch\ndef f():  # host-side: the batch preparer\n    return torch.arange(3)\n", 0),
    ("import torch\ndef f():\n    return torch.full(\n        (2,), 0)\n", 1),
    ("# host-side module: numpy readers\nimport torch\nx = torch.ones(2)\n", 0),
    ("import torch\n# host-side: ids checked on the host\nx = torch.as_tensor(ids)\n", 0),
    # the first GPU run's two constructor failures, as they were written
    ("import torch\nown = torch.tensor([position[int(t)] for t in tgt_ids])\n", 1),
    ("import torch\npositive = same & ~torch.eye(len(labels), dtype=torch.bool)\n", 1),
])
def test_the_constructor_check_finds_what_it_should(tmp_path, snippet, expected):
    path = PACKAGE / "_device_check_probe.py"  # inside the package: the check reports paths relative to it
    try:
        path.write_text(snippet)
        assert len(unmarked_constructors(path)) == expected
    finally:
        path.unlink()


@pytest.mark.parametrize("snippet", [
    "import torch.distributed as dist\ndist.all_reduce(t)\n",
    "from torch import distributed\ndistributed.broadcast(t, 0)\n",
    "import torch.distributed.nn.functional as dist_fn\ndist_fn.all_gather(t)\n",
    # the first GPU run's collective failure (train/recipe.py mean_across_ranks), as it was written
    "import torch\nimport torch.distributed as dist\nt = torch.tensor([1.0], dtype=torch.float64)\ndist.all_reduce(t)\n",
])
def test_the_collective_check_finds_direct_calls(snippet):
    path = PACKAGE / "_collective_check_probe.py"
    try:
        path.write_text(snippet)
        assert len(direct_tensor_collectives(path)) == 1
    finally:
        path.unlink()


class RejectsCpuTensors(RuntimeError):
    pass


@pytest.fixture
def nccl_like_group(monkeypatch):
    """A process group of 2 that says it is NCCL and refuses CPU tensors as NCCL does. This CPU-only torch has no
    CUDA, so a tensor moved to the group's device fails with torch's own "not compiled with CUDA" instead: that
    error shows the tensor was headed for the GPU, the group's error that it was not."""
    def refuse(*args, **kwargs):
        tensors = [a for a in args if isinstance(a, torch.Tensor)] + \
            [t for a in args if isinstance(a, list) for t in a if isinstance(t, torch.Tensor)]
        if any(t.device.type == "cpu" for t in tensors):
            raise RejectsCpuTensors("No backend type associated with device type cpu")

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "nccl")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    for name in ("all_reduce", "all_gather", "broadcast"):
        monkeypatch.setattr(dist, name, refuse)


def _headed_for_cuda(call) -> None:
    with pytest.raises((AssertionError, RuntimeError)) as raised:
        call()
    assert not isinstance(raised.value, RejectsCpuTensors), "a CPU tensor reached the NCCL group"
    assert "CUDA" in str(raised.value) or "cuda" in str(raised.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the NCCL-like group stands in for a GPU where there is none")
def test_a_run_s_metrics_are_averaged_on_the_nccl_group_s_device(nccl_like_group):
    from distalign.train.recipe import mean_across_ranks

    _headed_for_cuda(lambda: mean_across_ranks({"Train/loss": 1.0}))  # the first GPU run's failure


@pytest.mark.skipif(torch.cuda.is_available(), reason="the NCCL-like group stands in for a GPU where there is none")
@pytest.mark.parametrize("with_grad, same_size", [(False, False), (True, True), (True, False)])
def test_gathered_rows_go_to_the_nccl_group_s_device(nccl_like_group, with_grad, same_size):
    rows = torch.zeros(3, 4, requires_grad=with_grad)
    _headed_for_cuda(lambda: collectives.all_gather_rows(rows, with_grad=with_grad, same_size=same_size))


@pytest.mark.parametrize("backend, tensor_device, expected", [
    ("nccl", "cuda:1", "cuda:1"),
    ("gloo", "cpu", "cpu"),
    ("gloo", "cuda:0", "cpu"),  # gloo lacks some collectives on CUDA tensors
    ("cpu:gloo,cuda:nccl", "cpu", "cpu"),
    ("cpu:gloo,cuda:nccl", "cuda:0", "cuda:0"),
])
def test_collective_device_is_one_the_backend_serves(monkeypatch, backend, tensor_device, expected):
    monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)
    assert collectives.collective_device(torch.device(tensor_device)) == torch.device(expected)


def test_collectives_on_a_gloo_group_of_one_return_what_they_got(gloo_group):
    t = torch.arange(4.0)
    assert torch.equal(collectives.all_reduce_sum(t), t)
    assert collectives.all_gather_tensors(t)[0] is t
    assert collectives.all_gather_rows(t[:, None]).shape == (4, 1)


def test_the_bare_loop_s_info_nce_masks_on_the_labels_device():
    """The GPU bench's Hugging Face Trainer engine: ``torch.eye`` on CPU met CUDA labels (``bench/bare_loop.py``); on
    meta labels the same line raised "Tensor on device cpu is not on the expected device meta!"."""
    from distalign.bench.bare_loop import BareObjectives

    words, labels = torch.empty(6, 4, device="meta"), torch.tensor([0, 1, 2, 0, 1, 2], device="meta")
    try:  # meta tensors check devices but hold no data: the boolean indexing at the end cannot run
        BareObjectives(torch.nn.Identity(), 0.07).info_nce(words, labels)
    except NotImplementedError as data_dependent:
        assert "nonzero" in str(data_dependent)


@pytest.mark.gpu  # skipped without CUDA (tests/conftest.py)
def test_collectives_on_a_real_nccl_group_of_one():
    from distalign.train.recipe import mean_across_ranks

    torch.cuda.set_device(0)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    try:
        assert mean_across_ranks({"Train/loss": 2.5, "perf/step_ms": 3.0}) == {"Train/loss": 2.5, "perf/step_ms": 3.0}
        cpu_sums = torch.tensor([[1.0, 2.0]], dtype=torch.float64)  # the MLM validation sums come back on the host
        assert collectives.all_reduce_sum(cpu_sums).device.type == "cpu"
        rows = torch.randn(3, 4, device="cuda", requires_grad=True)
        assert torch.equal(collectives.all_gather_rows(rows, with_grad=True), rows)
    finally:
        dist.destroy_process_group()


@pytest.mark.gpu  # skipped without CUDA (tests/conftest.py)
def test_the_alignment_score_and_the_bare_info_nce_agree_on_cuda_and_cpu():
    from distalign.bench.bare_loop import BareObjectives
    from distalign.eval.alignment import vocabulary_alignment

    embeddings = torch.randn(40, 8)
    args = ([1, 2, 3, 4], [21, 22, 23, 4], list(range(20, 40)) + [4])
    assert vocabulary_alignment(embeddings.cuda(), *args) == vocabulary_alignment(embeddings, *args)
    words, labels = torch.nn.functional.normalize(torch.randn(6, 4), dim=-1), torch.tensor([0, 1, 2, 0, 1, 2])
    objectives = BareObjectives(torch.nn.Identity(), 0.07)
    assert torch.allclose(objectives.info_nce(words.cuda(), labels.cuda()).cpu(), objectives.info_nce(words, labels))
