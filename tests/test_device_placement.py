"""A tensor meets the device of the data it meets, and every collective meets the device of its group.

The first GPU run failed on three lines that every CPU test passed: a CPU tensor all-reduced on an NCCL group
(``train/recipe.py``), a ``torch.eye`` on CPU masking CUDA labels (``tools/bench/bare_loop.py``) and a CPU index
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
# torch functions that make a tensor on the default device (CPU) unless given ``device=`` (``*_like`` and
# ``Tensor.new_*`` follow their input and are not here)
CONSTRUCTORS = {
    "tensor",
    "as_tensor",
    "asarray",
    "scalar_tensor",
    "eye",
    "arange",
    "range",
    "zeros",
    "ones",
    "full",
    "empty",
    "empty_strided",
    "rand",
    "randn",
    "randint",
    "randperm",
    "linspace",
    "logspace",
    "tril_indices",
    "triu_indices",
    "sparse_coo_tensor",
    "Generator",
}
# torch callables that always make a host tensor, whatever they are given: the legacy typed constructors refuse any
# ``device=`` but the CPU ("legacy constructor expects device type: cpu") and ``from_numpy``/``frombuffer`` share
# host memory. Such a call passes only when marked host-side, or moved in the same expression: a method chain on
# its result that includes ``.cuda(...)`` or ``.to(<device>, ...)``/``.to(device=...)`` (a ``.to(torch.<dtype>)``
# alone moves nothing), e.g. ``torch.from_numpy(a).to(x.device)``, ``torch.from_numpy(a).long().cuda()``. Statically
# a ``.to(name)`` is taken for a move unless ``name`` is a ``torch.<dtype>``: ``.to(some_dtype_variable)`` passes.
HOST_ONLY = {
    "from_numpy",
    "frombuffer",
    "Tensor",
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "ByteTensor",
    "CharTensor",
    "ShortTensor",
    "IntTensor",
    "LongTensor",
    "BoolTensor",
}
# tensor collectives: only ``distalign/collectives.py`` calls them (object collectives and barrier pick their device)
TENSOR_COLLECTIVES = {
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "broadcast",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "gather",
    "scatter",
    "all_reduce_coalesced",
    "all_gather_coalesced",
    "send",
    "recv",
    "isend",
    "irecv",
}
HOST_MARK = (
    "host-side"  # in a comment on (or just above) the call's lines, an enclosing ``def``, or "# host-side module"
)


def _module_files() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _comment(line: str) -> str:
    return line.split("#", 1)[1] if "#" in line else ""


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_path(name: str) -> Path | None:
    """The file of a ``distalign`` module, or None for any other name."""
    if name != "distalign" and not name.startswith("distalign."):
        return None
    base = PACKAGE.parent.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


class Names:
    """What each name of a module stands for, as dotted names (``dist`` -> ``torch.distributed``): its imports
    (``import torch as th``, ``from torch.distributed import all_reduce``, relative imports), wherever they are in the
    module, and plain assignments of a dotted name (``d = torch.distributed``, ``make = torch.zeros``). A name bound
    to several things stands for all of them. Dotted names through ``distalign`` modules are followed into those
    modules' names (``from distalign import collectives; collectives.dist.all_reduce`` is ``torch.distributed.
    all_reduce``). ``getattr`` with a string, ``importlib`` and names passed in from outside are not followed."""

    _cache: dict[tuple[Path, str], Names] = {}

    def __init__(self) -> None:
        self.bound: dict[str, set[str]] = {}

    def _read(self, tree: ast.Module, module: str, is_package: bool) -> None:
        package = module if is_package else module.rpartition(".")[0]
        assignments = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self._bind(alias.asname, alias.name)
                    else:  # ``import torch.distributed`` binds ``torch``
                        head = alias.name.split(".")[0]
                        self._bind(head, head)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                for alias in node.names:
                    if alias.name != "*":
                        self._bind(alias.asname or alias.name, f"{base}.{alias.name}")
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, (ast.Name, ast.Attribute))
            ):
                assignments.append((node.targets[0].id, node.value))
        for _ in range(3):  # chains of assignments (``d = torch.distributed; f = d.all_reduce``)
            for name, value in assignments:
                for target in self.resolve(value):
                    self._bind(name, target)

    def _bind(self, name: str, target: str) -> None:
        self.bound.setdefault(name, set()).add(target)

    @classmethod
    def of(cls, path: Path) -> Names:
        source = path.read_text()
        if (path, source) not in cls._cache:
            cls._cache[path, source] = names = cls()  # cached before it is read: modules may name each other
            names._read(ast.parse(source), _module_name(path), path.name == "__init__.py")
        return cls._cache[path, source]

    def resolve(self, node: ast.AST) -> set[str]:
        """The dotted names ``node`` (a name or an attribute chain on one) may stand for."""
        if isinstance(node, ast.Name):
            found = self.bound.get(node.id, set())
        elif isinstance(node, ast.Attribute):
            found = {f"{base}.{node.attr}" for base in self.resolve(node.value)}
        else:
            return set()
        return {followed for name in found for followed in _through_distalign(name)}


def _through_distalign(name: str, depth: int = 0) -> set[str]:
    """``distalign.collectives.dist.all_reduce`` -> ``torch.distributed.all_reduce``: a name a ``distalign`` module
    imports, read through that module."""
    parts = name.split(".")
    if parts[0] != "distalign" or depth > 8:
        return {name}
    for cut in range(len(parts) - 1, 0, -1):
        path = _module_path(".".join(parts[:cut]))
        if path is not None:
            names = Names.of(path)
            if parts[cut] not in names.bound:
                return {name}
            return {
                f"{target}.{'.'.join(parts[cut + 1 :])}".rstrip(".")
                for bound in names.bound[parts[cut]]
                for target in _through_distalign(bound, depth + 1)
            }
    return {name}


def _torch_name(names: Names, node: ast.AST, within: set[str]) -> str | None:
    """``name`` when ``node`` stands for ``torch.<name>`` with name in ``within``."""
    for dotted in names.resolve(node):
        head, _, name = dotted.rpartition(".")
        if head == "torch" and name in within:
            return name
    return None


def _moved(node: ast.Call, parents: dict[ast.AST, ast.AST], names: Names) -> bool:
    """Whether the method calls chained on ``node``'s result include a move to a device."""
    while (
        isinstance(parents.get(node), ast.Attribute)
        and isinstance(parents.get(parents[node]), ast.Call)
        and parents[parents[node]].func is parents[node]
    ):
        method, node = parents[node].attr, parents[parents[node]]
        if method == "cuda":
            return True
        if method == "to" and (
            any(k.arg == "device" for k in node.keywords)
            or (node.args and not any(_is_dtype(d) for d in names.resolve(node.args[0])))
        ):
            return True
    return False


def _is_dtype(dotted: str) -> bool:
    head, _, name = dotted.rpartition(".")
    return head == "torch" and isinstance(getattr(torch, name, None), torch.dtype)


def unmarked_constructors(path: Path) -> list[str]:
    """``file:line`` of each torch constructor call without ``device=`` that no host-side mark covers.

    A constructor is named through the module's imports (``torch.zeros``, ``th.zeros`` after ``import torch as th``,
    ``zeros`` after ``from torch import zeros``). A call that is handed a constructor function (``functools.partial(
    torch.tensor, dtype=...)``, ``map(torch.tensor, rows)``) counts as a constructor call there, cleared only by a
    ``device=`` it binds itself. ``HOST_ONLY`` callables always make a host tensor: ``device=`` does not clear them,
    a move in the same expression does (``_moved``)."""
    source = path.read_text()
    lines = source.splitlines()
    if any(line.startswith(f"# {HOST_MARK} module") for line in lines):
        return []
    tree = ast.parse(source)
    names = Names.of(path)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []

    def unmarked(call: ast.Call) -> str | None:
        binds_device = any(k.arg == "device" for k in call.keywords)
        name = _torch_name(names, call.func, CONSTRUCTORS | HOST_ONLY)
        if name in HOST_ONLY:
            return None if _moved(call, parents, names) else f"torch.{name}(...) always makes a host tensor"
        if name is not None:
            return None if binds_device else f"torch.{name}(...)"
        for handed in [*call.args, *(k.value for k in call.keywords)]:
            # the typed constructors (``torch.Tensor``) are types too: ``isinstance(x, torch.Tensor)`` is no call
            name = _torch_name(names, handed, {n for n in CONSTRUCTORS | HOST_ONLY if n[0].islower()})
            if name is not None and (name in HOST_ONLY or not binds_device):
                return f"torch.{name} handed to a call"
        return None

    def visit(node: ast.AST, marked: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            header = lines[node.lineno - 1 : node.body[0].lineno - 1] or [lines[node.lineno - 1]]
            marked = marked or any(HOST_MARK in _comment(line) for line in header)
        if (
            isinstance(node, ast.Call)
            and not marked
            and not any(HOST_MARK in _comment(line) for line in lines[max(node.lineno - 2, 0) : node.end_lineno])
        ):
            what = unmarked(node)
            if what is not None:
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {what}")
        for child in ast.iter_child_nodes(node):
            visit(child, marked)

    visit(tree, False)
    return found


def _collective(dotted: str) -> bool:
    """``torch.distributed.all_reduce``, ``torch.distributed.nn.functional.all_gather``,
    ``torch.distributed.distributed_c10d.broadcast``...: a tensor collective anywhere under ``torch.distributed``."""
    head, _, name = dotted.rpartition(".")
    return (head == "torch.distributed" or head.startswith("torch.distributed.")) and name in TENSOR_COLLECTIVES


def direct_tensor_collectives(path: Path) -> list[str]:
    """``file:line`` of each use of a tensor collective: a call, or the collective handed on as a value
    (``functools.partial(dist.all_reduce, ...)``, ``reduce = dist.all_reduce``), named through the module's imports
    and assignments (``Names``). Imports alone are not uses."""
    tree = ast.parse(path.read_text())
    names = Names.of(path)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = {}
    for node in ast.walk(tree):
        if (
            not isinstance(node, (ast.Name, ast.Attribute))
            or not isinstance(node.ctx, ast.Load)
            or isinstance(parents.get(node), ast.Attribute)
        ):  # the whole chain, not its prefixes
            continue
        hits = sorted(d for d in names.resolve(node) if _collective(d))
        if hits:
            found.setdefault(node.lineno, f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {hits[0]}")
    return list(found.values())


def test_every_torch_constructor_names_its_device_or_is_marked_host_side():
    offenders = [hit for path in _module_files() for hit in unmarked_constructors(path)]
    assert not offenders, (
        "tensors made on the default device (CPU) where a GPU run's data may be on CUDA; pass "
        "device=<the data's device>, or mark the line or its def '# host-side' with why:\n  " + "\n  ".join(offenders)
    )


def test_only_the_collectives_module_calls_tensor_collectives():
    offenders = [
        hit for path in _module_files() if path != PACKAGE / "collectives.py" for hit in direct_tensor_collectives(path)
    ]
    assert not offenders, (
        "call distalign.collectives instead (it puts tensors on the group's device):\n  " + "\n  ".join(offenders)
    )


@pytest.mark.parametrize(
    "snippet, expected",
    [
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
        # from_numpy and the legacy typed constructors: host tensors always, unless moved in the same expression
        ("import torch\nx = torch.from_numpy(a)\n", 1),
        ("import torch\nx = torch.from_numpy(a).float()\n", 1),
        ("import torch\nx = torch.from_numpy(a).to(torch.float32)\n", 1),  # a dtype is no move
        ("import torch\nx = torch.from_numpy(a).to(dtype=torch.float32)\n", 1),
        ("import torch\nx = torch.from_numpy(a).to(device)\n", 0),
        ("import torch\nx = torch.from_numpy(a).to(y.device, non_blocking=True)\n", 0),
        ("import torch\nx = torch.from_numpy(a).to(device=y.device)\n", 0),
        ("import torch\nx = torch.from_numpy(a).long().cuda()\n", 0),
        ("import torch\nx = torch.from_numpy(a)  # host-side: the Ray Data preparer\n", 0),
        ("import torch\nx = f(torch.from_numpy(a)).to(device)\n", 1),  # the move is not on its result
        ("import torch\nx = torch.Tensor(3, 4)\n", 1),
        ("import torch\nx = torch.LongTensor([1, 2])\n", 1),
        ("import torch\nx = torch.FloatTensor([1.0])\ny = torch.BoolTensor([True])\n", 2),
        ("import torch\nx = torch.LongTensor([1, 2], device='cpu')\n", 1),  # the only device it takes
        ("import torch\nx = torch.LongTensor([1, 2]).to(y.device)\n", 0),
        ("import torch\ndef f(x: torch.Tensor) -> torch.LongTensor:\n    return isinstance(x, torch.Tensor)\n", 0),
        # names through the module's imports and assignments
        ("import torch as th\nx = th.zeros(3)\n", 1),
        ("import torch as th\nx = th.zeros(3, device=y.device)\n", 0),
        ("from torch import zeros\nx = zeros(3)\n", 1),
        ("from torch import arange as span\nx = span(3)\n", 1),
        ("from torch import from_numpy\nx = from_numpy(a)\n", 1),
        ("import torch\nmake = torch.zeros\nx = make(3)\n", 1),
        ("from numpy import zeros\nimport numpy as np\nx = zeros(3) + np.arange(3)\n", 0),
        ("from distalign import collectives\nx = collectives.torch.ones(2)\n", 1),
        # a constructor handed to a call: a constructor call there, unless that call binds device=
        ("import functools\nimport torch\nas_long = functools.partial(torch.tensor, dtype=torch.long)\n", 1),
        ("from functools import partial\nimport torch\nas_long = partial(torch.tensor, dtype=torch.long)\n", 1),
        ("from functools import partial\nimport torch\nas_long = partial(torch.tensor, device=y.device)\n", 0),
        ("import torch\nrows = list(map(torch.as_tensor, arrays))\n", 1),
        ("import torch\nrows = list(map(torch.from_numpy, arrays))  # host-side: moved by the caller\n", 0),
        # what follows its input stays allowed
        ("import torch\nx = torch.zeros_like(y)\nz = torch.full_like(y, 2)\nw = torch.randint_like(y, 9)\n", 0),
        ("import torch\nx = torch.empty(3, 4, device=y.device)\n", 0),
        ("import torch\nx = y.new_zeros(3)\nz = y.new_tensor([1])\nw = y.new_full((2,), 0)\n", 0),
    ],
)
def test_the_constructor_check_finds_what_it_should(tmp_path, snippet, expected):
    path = PACKAGE / "_device_check_probe.py"  # inside the package: the check reports paths relative to it
    try:
        path.write_text(snippet)
        assert len(unmarked_constructors(path)) == expected
    finally:
        path.unlink()


@pytest.mark.parametrize(
    "snippet, expected",
    [
        ("import torch.distributed as dist\ndist.all_reduce(t)\n", 1),
        ("from torch import distributed\ndistributed.broadcast(t, 0)\n", 1),
        ("import torch.distributed.nn.functional as dist_fn\ndist_fn.all_gather(t)\n", 1),
        # the first GPU run's collective failure (train/recipe.py mean_across_ranks), as it was written
        (
            "import torch\nimport torch.distributed as dist\nt = torch.tensor([1.0], dtype=torch.float64)\n"
            "dist.all_reduce(t)\n",
            1,
        ),
        # names through the module's imports and assignments, and whole attribute chains
        ("import torch\ntorch.distributed.all_reduce(t)\n", 1),
        ("import torch.distributed\ntorch.distributed.all_gather_into_tensor(out, t)\n", 1),
        ("import torch.distributed as d\nd.broadcast(t, 0)\n", 1),
        ("from torch.distributed import all_reduce\nall_reduce(t)\n", 1),
        ("from torch.distributed import reduce_scatter_tensor as rs\nrs(out, t)\n", 1),
        ("import torch\ntorch.distributed.nn.functional.all_gather(t)\n", 1),
        ("from torch.distributed.nn.functional import all_gather\nall_gather(t)\n", 1),
        ("import torch.distributed.nn as dist_nn\ndist_nn.all_reduce(t)\n", 1),
        ("from torch import distributed as d\nd.distributed_c10d.all_reduce(t)\n", 1),
        ("import torch\nd = torch.distributed\nd.all_reduce(t)\n", 1),
        ("import torch.distributed as dist\nsum_up = dist.all_reduce\nsum_up(t)\n", 2),
        (
            "import functools\nimport torch.distributed as dist\n"
            "functools.partial(dist.all_reduce, op=dist.ReduceOp.MAX)(t)\n",
            1,
        ),
        ("from distalign import collectives\ncollectives.dist.all_reduce(t)\n", 1),
        ("from .collectives import dist_fn\ndist_fn.all_gather(t)\n", 1),
        ("from . import collectives\ncollectives.torch.distributed.broadcast(t, 0)\n", 1),
        # object collectives and barrier pick their device; distalign.collectives is the way;
        # torch.gather is no collective
        (
            "import torch.distributed as dist\ndist.all_gather_object(out, x)\ndist.broadcast_object_list(xs, 0)\n"
            "dist.barrier()\n",
            0,
        ),
        ("from distalign import collectives\ncollectives.all_reduce_sum(t)\ncollectives.all_gather_rows(t)\n", 0),
        ("import torch\nx = torch.gather(y, 1, index)\nz = y.scatter(1, index, 0.0)\n", 0),
        ("import torch.distributed as dist\nfrom torch.distributed import all_reduce\n", 0),  # imported, not used
        ("def all_reduce(t):\n    return t\nall_reduce(t)\n", 0),
    ],
)
def test_the_collective_check_finds_direct_calls(snippet, expected):
    path = PACKAGE / "_collective_check_probe.py"
    try:
        path.write_text(snippet)
        assert len(direct_tensor_collectives(path)) == expected
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
        tensors = [a for a in args if isinstance(a, torch.Tensor)] + [
            t for a in args if isinstance(a, list) for t in a if isinstance(t, torch.Tensor)
        ]
        if any(t.device.type == "cpu" for t in tensors):
            raise RejectsCpuTensors("No backend type associated with device type cpu")

    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "get_backend", lambda group=None: "nccl")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    for name in ("all_reduce", "all_gather", "broadcast"):
        monkeypatch.setattr(dist, name, refuse)
    # object collectives pick their device themselves: both ranks hand over the same object here
    monkeypatch.setattr(
        dist, "all_gather_object", lambda out, obj, group=None: out.__setitem__(slice(None), [obj] * len(out))
    )
    monkeypatch.setattr(dist, "get_rank", lambda group=None: 0)


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


@pytest.mark.parametrize(
    "backend, tensor_device, expected",
    [
        ("nccl", "cuda:1", "cuda:1"),
        ("gloo", "cpu", "cpu"),
        ("gloo", "cuda:0", "cpu"),  # gloo lacks some collectives on CUDA tensors
        ("cpu:gloo,cuda:nccl", "cpu", "cpu"),
        ("cpu:gloo,cuda:nccl", "cuda:0", "cuda:0"),
    ],
)
def test_collective_device_is_one_the_backend_serves(monkeypatch, backend, tensor_device, expected):
    monkeypatch.setattr(dist, "get_backend", lambda group=None: backend)
    assert collectives.collective_device(torch.device(tensor_device)) == torch.device(expected)


def test_collectives_on_a_gloo_group_of_one_return_what_they_got(gloo_group):
    t = torch.arange(4.0)
    assert torch.equal(collectives.all_reduce_sum(t), t)
    assert collectives.all_gather_tensors(t)[0] is t
    assert collectives.all_gather_rows(t[:, None]).shape == (4, 1)


def test_the_bare_loop_s_info_nce_masks_on_the_labels_device():
    """The GPU bench's Hugging Face Trainer engine: ``torch.eye`` on CPU met CUDA labels
    (``tools/bench/bare_loop.py``); on meta labels the same line raised "Tensor on device cpu is not on the expected
    device meta!"."""
    from distalign.tools.bench.bare_loop import BareObjectives

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
    from distalign.eval.alignment import vocabulary_alignment
    from distalign.tools.bench.bare_loop import BareObjectives

    embeddings = torch.randn(40, 8)
    args = ([1, 2, 3, 4], [21, 22, 23, 4], list(range(20, 40)) + [4])
    assert vocabulary_alignment(embeddings.cuda(), *args) == vocabulary_alignment(embeddings, *args)
    words, labels = torch.nn.functional.normalize(torch.randn(6, 4), dim=-1), torch.tensor([0, 1, 2, 0, 1, 2])
    objectives = BareObjectives(torch.nn.Identity(), 0.07)
    assert torch.allclose(objectives.info_nce(words.cuda(), labels.cuda()).cpu(), objectives.info_nce(words, labels))
