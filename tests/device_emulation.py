"""A GPU, emulated on the CPU: which tensors are on the training device, where a host tensor meets one, and where the
host waits for the device (a host sync) inside a training step.

On a CPU all devices are one, so the two ways GPU runs fail that CPU tests never see are emulated here:

- a host (CPU) tensor meeting a device tensor in an op: CUDA refuses it ("Expected all tensors to be on the same
  device") unless the host tensor is a 0-dim scalar;
- a host sync in a step (``.item()``, ``.tolist()``, ``bool(t)``, ``nonzero``, boolean-mask indexing, ``.cpu()``,
  ...): the host waits for every queued kernel, and the GPU idles until the host queues the next one.

The emulated device is ``EMULATED = torch.device("cpu", 0)``: a real PyTorch device that runs on the CPU, yet
``torch.device("cpu", 0) != torch.device("cpu")``, and ``t.to("cpu:0")`` makes a real copy (``aten._to_copy``), so
a host tensor and its device copy are distinct objects, as on a GPU. The recipe is given ``device=EMULATED``.

Marking rule (the placement of every tensor, kept in a ``WeakIdKeyDictionary``, never by data pointer):

- DEVICE: the parameters and buffers of the trained module once it is built (``mark_module``; ``Module.to``'s
  ``param.data = moved`` already moves a parameter's place, so DDP's gradient buckets are device tensors); the batch
  tensors ``distalign.train.recipe.to_device`` returns (``patch_to_device`` makes it clone and mark them; the originals
  are registered HOST); the output of a factory or copy op whose ``device=`` argument is ``EMULATED``
  (``torch.zeros(n, device=x.device)``, ``t.to(x.device)``); the outputs of any other op with a DEVICE input (views
  included, backward ops included: autograd runs them under the same mode).
- HOST: everything else. A factory op without ``device=`` or with ``device="cpu"`` makes a host tensor, as it
  does on a GPU run (no default device is set), whoever calls it; so does an op on host tensors only; tensors
  that existed before the emulation began (the prepared data, the plan) are host, as on a GPU run.
- ``t.device`` of a DEVICE tensor reads ``EMULATED`` (a ``TorchFunctionMode`` answers the property), so code that
  creates tensors "on the device of the data it meets" (``device=x.device``) gets device tensors, and code that
  forgets ``device=`` gets host tensors. ``t.device.type`` stays "cpu": CUDA-only branches are not taken.
- ``t.cpu()``, ``t.to("cpu")``, ``t.numpy()`` of a DEVICE tensor give a HOST clone (and count a sync), except
  where torch's own Python code calls ``to``: it moves tensors to a device it read from C++, the tensor's real
  device ("cpu" here), so that is taken as the tensor's own device (``clip_grad_norm_``).
- A factory op dispatched from C++ (no Python-level factory around it: DDP's gradient buckets) is UNKNOWN: its
  ``device=cpu`` may be a device tensor's real options; UNKNOWN tensors are never reported in a mix, and an op on
  UNKNOWN and HOST tensors gives UNKNOWN. ``device=cpu`` on an op with tensor inputs (``grad.new_zeros(size,
  options)`` in a backward) is likewise ignored: such an op takes its inputs' place.

What fails (``DeviceMixError``, with the op, the host tensor and the distalign frames responsible): an op, other
than the explicit moves (``copy_``, ``_to_copy``, ``lift_fresh``), with a DEVICE input and a HOST input of one
dimension or more. A 0-dim host tensor is allowed, as CUDA allows CPU scalars. A HOST index tensor in advanced
indexing (``aten.index``/``index_put``) of a DEVICE tensor is allowed (CUDA accepts it, copying the indices first,
a pageable host-to-device copy that waits for the device): it is counted as a sync "index with host indices".

What counts as a host sync (only on DEVICE inputs; host-side reads cost nothing): ``aten._local_scalar_dense``
(``item``, ``int``, ``float``, ``bool``, ``if t:``, f-string formatting), ``nonzero``, ``is_nonzero``, boolean-mask
indexing and assignment (``aten.index``/``index_put`` with a bool index), ``masked_select``, ``equal``,
``unique*``, ``repeat_interleave`` without ``output_size``, ``bincount``, the linear-algebra ops that check their
``info`` on the host (``eigh``, ``svd``, ``eig``, ``cholesky`` with ``check_errors``; PyTorch's documentation: "this
function synchronizes that device with the CPU"), a copy to the host (``_to_copy``/``copy_`` to a host tensor), and
the Python-level ``tolist``, ``numpy``/``__array__``, ``cpu``, ``to(<host>)``, which may dispatch no aten op on a CPU
tensor. Each is recorded with the first distalign frame on the Python stack (``distalign/...py:line``) and the
innermost frame outside torch (a transformers line, say). ``aten.nonzero_static`` is not counted: its size is
fixed, it is the sync-free replacement.

Known blind spots (false negatives):
- CUDA-only branches (``device.type == "cuda"``: pinned copies, fused AdamW, CUDA events) do not run; neither do
  DeepSpeed's engine (the tests use DDP) nor ``torch.compile``.
- Python functions that torch itself dispatches through ``__torch_function__`` (``F.cross_entropy``...) run with
  the function mode popped: a ``tolist()`` inside one is not seen (their aten ops are).
- A sync in a backward op is attributed to the ``backward()`` call (engine.py), not the forward line.
- Tensors created before the emulation began are host: a device tensor kept from before would be a false positive.
- Syncs hidden in C++ kernels that dispatch nothing (a CUDA kernel reading its size from the device) are not seen.
False positives: ``DeviceMixError`` on an op CUDA would accept with a 1-element host tensor of dim 1 (CUDA accepts
only 0-dim CPU tensors, so none known); a CPU tensor meant to stay in pinned memory is not modelled.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.weak import WeakIdKeyDictionary

EMULATED = torch.device("cpu", 0)
import distalign  # noqa: E402

PACKAGE = Path(distalign.__file__).resolve().parent  # the package under test, wherever it was imported from
_THIS = str(Path(__file__).resolve())
_TORCH = str(Path(torch.__file__).resolve().parent)
DEVICE, HOST, UNKNOWN = "device", "host", "unknown"

aten = torch.ops.aten
# the explicit moves between host and device: no mix
MOVES = {
    aten._to_copy,
    aten.copy_,
    aten.copy,
    aten.lift_fresh,
    aten.lift_fresh_copy,
    aten._copy_from,
    aten._copy_from_and_resize,
}
INDEXING = {
    aten.index,
    aten.index_put,
    aten.index_put_,
    aten._index_put_impl_,
    aten._unsafe_index,
    aten._unsafe_index_put,
}
SYNC_OPS = {
    aten._local_scalar_dense: "item",
    aten.nonzero: "nonzero",
    aten.is_nonzero: "is_nonzero",
    aten.masked_select: "masked_select",
    aten.equal: "equal",
    aten._unique: "unique",
    aten._unique2: "unique",
    aten.unique_dim: "unique",
    aten.unique_consecutive: "unique",
    aten.unique_dim_consecutive: "unique",
    aten.bincount: "bincount",
    aten._linalg_eigh: "linalg info check (eigh)",
    aten._linalg_svd: "linalg info check (svd)",
    aten.linalg_eig: "linalg info check (eig)",
    aten._linalg_check_errors: "linalg info check",
}
DEVICE_GET = torch._C.TensorBase.device.__get__
DATA_SET = torch._C.TensorBase.data.__set__
# Python-level factories: without ``device=`` (or with a host one) they make host tensors
FACTORIES = {
    getattr(torch, name)
    for name in (
        "zeros",
        "ones",
        "empty",
        "full",
        "arange",
        "range",
        "eye",
        "rand",
        "randn",
        "randint",
        "randperm",
        "linspace",
        "logspace",
        "tensor",
        "as_tensor",
        "asarray",
        "from_numpy",
        "scalar_tensor",
        "empty_strided",
        "tril_indices",
        "triu_indices",
        "frombuffer",
    )
}
# factories from a tensor: they inherit its place unless given ``device=``
LIKE_FACTORIES = {
    getattr(torch, name)
    for name in ("zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like")
} | {getattr(torch.Tensor, name) for name in ("new_zeros", "new_ones", "new_empty", "new_full", "new_tensor")}
HOST_READS = {torch._C.TensorBase.tolist: "tolist", torch._C.TensorBase.numpy: "numpy", torch.Tensor.__array__: "numpy"}


class DeviceMixError(AssertionError):
    """A host tensor met a tensor on the training device in one op: CUDA raises on this line."""


@dataclass(frozen=True)
class Sync:
    kind: str  # what waited: "item", "boolean-mask index", "tolist", ...
    where: str  # the first distalign frame: "distalign/objectives/mlm.py:88 (forward)"
    via: str = ""  # the innermost frame outside torch and distalign, if not the same (a transformers line)

    def __str__(self) -> str:
        return f"{self.kind} @ {self.where}" + (f" via {self.via}" if self.via else "")


def _frames() -> list:
    frame, out = sys._getframe(1), []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


def _short(frame, root: Path = PACKAGE) -> str:
    path = Path(frame.f_code.co_filename)
    try:
        name = str(path.resolve().relative_to(root.parent))
    except ValueError:
        parts = path.parts
        name = "/".join(parts[parts.index("site-packages") + 1 :]) if "site-packages" in parts else path.name
    return f"{name}:{frame.f_lineno} ({frame.f_code.co_name})"


def responsible(limit: int = 1, root: Path = PACKAGE) -> tuple[list[str], str]:
    """The innermost ``limit`` frames under ``root`` (distalign) on the stack, and the innermost frame outside torch,
    this module and ``root`` (where an op was called from, if that is a library)."""
    frames = [f for f in _frames() if f.f_code.co_filename != _THIS]
    mine = lambda f: f.f_code.co_filename.startswith(str(root) + "/")  # noqa: E731
    ours = [_short(f, root) for f in frames if mine(f)][:limit]
    outside = next(
        (
            f
            for f in frames
            if not f.f_code.co_filename.startswith(_TORCH)
            and not mine(f)
            and "/contextlib.py" not in f.f_code.co_filename
        ),
        None,
    )
    first_ours = next((f for f in frames if mine(f)), None)
    via = (
        _short(outside, root)
        if outside is not None and (first_ours is None or frames.index(outside) < frames.index(first_ours))
        else ""
    )
    return ours or ["<outside distalign>"], via


def _called_from_torch() -> bool:
    """Whether torch itself called the op: its code moves a tensor to a device it read from C++ (``clip_grad_norm_``
    groups gradients by their real device, ``cpu``), which is the tensor's own device, not the host."""
    frame = sys._getframe(1)
    while frame is not None and (
        frame.f_code.co_filename == _THIS
        or frame.f_code.co_filename.endswith(("torch/overrides.py", "torch/_compile.py", "torch/_dynamo/eval_frame.py"))
    ):
        frame = frame.f_back
    return frame is not None and frame.f_code.co_filename.startswith(_TORCH)


def _tensors(tree) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]


def _target_device(args, kwargs, emulation: DeviceEmulation) -> torch.device | None:
    """The device ``Tensor.to(...)`` was asked for, or None (a dtype-only conversion)."""
    if kwargs.get("device") is not None:
        return torch.device(kwargs["device"])
    for arg in args[1:]:
        if isinstance(arg, (torch.device, str)):
            return torch.device(arg)
        if isinstance(arg, torch.Tensor):
            return EMULATED if emulation.on_device(arg) else torch.device("cpu")
    return None


class _Functions(TorchFunctionMode):
    """The Python-level side: ``t.device`` of a device tensor, and the host reads that dispatch no op on CPU."""

    def __init__(self, emulation: DeviceEmulation):
        super().__init__()
        self.emulation = emulation

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        em = self.emulation
        if func == DEVICE_GET:
            return EMULATED if em.on_device(args[0]) else func(*args)
        if func == DATA_SET:  # ``param.data = moved`` (``Module.to``): the parameter is where its new data is
            func(*args, **kwargs)
            em.placement[args[0]] = DEVICE if em.on_device(args[1]) else HOST
            return None
        if func in HOST_READS and em.on_device(args[0]):
            em.record(HOST_READS[func])
            with em.quiet():
                return func(*args, **kwargs)
        if func in (torch._C.TensorBase.cpu, torch._C.TensorBase.to) and isinstance(args[0], torch.Tensor):
            source = args[0]
            target = torch.device("cpu") if func is torch._C.TensorBase.cpu else _target_device(args, kwargs, em)
            if em.on_device(source) and target is not None and target != EMULATED and not _called_from_torch():
                em.record("cpu" if func is torch._C.TensorBase.cpu else f"to({target})")
                with em.quiet():
                    out = func(*args, **kwargs)
                    if out is source:
                        out = source.clone()
                em.placement[out] = HOST
                return out
            return func(*args, **kwargs)
        if func in (torch._C.TensorBase.type, torch.Tensor.type_as) and len(args) > 1:
            # the type string of a device tensor names the device on a GPU ("torch.cuda.IntTensor"), not here:
            # ``t.type(s)`` keeps ``t``'s place, ``t.type_as(other)`` takes ``other``'s
            out = func(*args, **kwargs)
            if out is not args[0]:
                model = args[1] if func is torch.Tensor.type_as else args[0]
                em.placement[out] = DEVICE if em.on_device(model) else HOST
            return out
        if func in FACTORIES or (func in LIKE_FACTORIES and kwargs.get("device") is not None):
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor) and not any(out is t for t in _tensors((args, kwargs))):
                device = kwargs.get("device")
                em.placement[out] = DEVICE if device is not None and torch.device(device) == EMULATED else HOST
                if em.placement[out] == HOST:
                    ours, via = responsible(root=em.root)
                    em.origin[out] = f"{getattr(func, '__name__', func)} at {ours[0]}" + (f" via {via}" if via else "")
            return out
        return func(*args, **kwargs)


class _Dispatch(TorchDispatchMode):
    """The aten side: placement of every op's outputs, mixes, and syncs."""

    def __init__(self, emulation: DeviceEmulation):
        super().__init__()
        self.emulation = emulation

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        em = self.emulation
        packet = func.overloadpacket
        inputs = _tensors((args, kwargs))
        on_device = any(em.on_device(t) for t in inputs)
        if on_device:
            em.check(func, packet, args, kwargs, inputs)
        out = func(*args, **kwargs)
        device = kwargs.get("device")
        if device is not None and torch.device(device) == EMULATED:
            placement = DEVICE
        elif not inputs:
            # a factory op: a Python-level one is placed by ``_Functions``; one from C++ (DDP's gradient buckets,
            # built from a parameter's real options) could be either: not checked
            placement = UNKNOWN
        else:
            # ``device=cpu`` here may be C++ passing on an input's real options (``grad.new_zeros(size, options)``
            # in a backward): only the Python-level calls (``_Functions``) tell a host request apart
            placement = (
                DEVICE if on_device else (UNKNOWN if any(em.placement.get(t) == UNKNOWN for t in inputs) else HOST)
            )
        if packet in (aten.copy_, aten.copy) and em.on_host(args[0]) and em.on_device(args[1]):
            em.record("copy to host")
        for tensor in _tensors(out):
            if not any(tensor is t for t in inputs):  # an in-place op's output keeps its place
                em.placement[tensor] = placement
        return out


@dataclass
class DeviceEmulation:
    """``with DeviceEmulation() as em:`` everything run inside is placed (module docstring); ``em.counting()``
    opens a window whose syncs ``em.syncs`` holds; ``em.checking`` (on) raises ``DeviceMixError`` on a mix."""

    placement: WeakIdKeyDictionary = field(default_factory=WeakIdKeyDictionary)
    origin: WeakIdKeyDictionary = field(default_factory=WeakIdKeyDictionary)  # where a host factory was called
    syncs: list[Sync] | None = None  # None outside a window
    checking: bool = True
    root: Path = PACKAGE  # the code whose lines are reported (the self-tests name their own directory)
    _quiet: int = 0
    _modes: contextlib.ExitStack | None = None

    # -- placement
    def on_device(self, tensor) -> bool:
        return isinstance(tensor, torch.Tensor) and self.placement.get(tensor) == DEVICE

    def on_host(self, tensor) -> bool:
        """Known to be on the host: placed there, or made before the emulation began (the prepared data)."""
        return isinstance(tensor, torch.Tensor) and self.placement.get(tensor, HOST) == HOST

    def mark(self, *tensors: torch.Tensor, where: str = DEVICE) -> None:
        for tensor in tensors:
            self.placement[tensor] = where

    def mark_module(self, module: torch.nn.Module) -> None:
        """The module's parameters and buffers are on the device (after the engine moved them)."""
        self.mark(*module.parameters(), *module.buffers())

    def to_device(self, batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
        """``distalign.device.to_device`` as a GPU does it: a distinct device copy of every host tensor."""
        assert device == EMULATED, f"the recipe was given {device}, not the emulated device {EMULATED}"
        moved = {}
        for name, tensor in batch.items():
            self.placement.setdefault(tensor, HOST)
            with torch.no_grad():
                copy = tensor.clone()
            self.placement[copy] = DEVICE
            moved[name] = copy
        return moved

    def patch_to_device(self, monkeypatch) -> None:
        import distalign.train.recipe

        monkeypatch.setattr(distalign.train.recipe, "to_device", self.to_device)

    # -- checks and records
    @contextlib.contextmanager
    def quiet(self):
        """Inside a host read counted at the Python level: its aten ops are not counted again."""
        self._quiet += 1
        try:
            yield
        finally:
            self._quiet -= 1

    def record(self, kind: str) -> None:
        if self.syncs is None or self._quiet:
            return
        ours, via = responsible(root=self.root)
        self.syncs.append(Sync(kind, ours[0], via))

    def check(self, func, packet, args, kwargs, inputs: list[torch.Tensor]) -> None:
        """An op with a device input: a mix raises (while ``checking``), a sync is recorded (in a window)."""
        if packet in MOVES:
            return
        if packet in INDEXING:
            indices = _tensors(args[1]) if len(args) > 1 else []
            for index in indices:
                if index.dtype in (torch.bool, torch.uint8) and (self.on_device(index) or self.on_device(args[0])):
                    self.record("boolean-mask index" if packet is aten.index else "boolean-mask assignment")
                    break
            if any(self.on_host(i) and i.dim() > 0 for i in indices) and self.on_device(args[0]):
                self.record("index with host indices")
            rest = [t for t in inputs if not any(t is i for i in indices)]
            host = [t for t in rest if self.on_host(t) and t.dim() > 0]
            if host and any(self.on_device(t) for t in rest):
                self._mix(func, host[0], inputs)
            return
        host = [t for t in inputs if self.on_host(t) and t.dim() > 0]
        if host:
            self._mix(func, host[0], inputs)
        if packet in SYNC_OPS:
            self.record(SYNC_OPS[packet])
        elif (
            packet is aten.repeat_interleave
            and func._overloadname in ("Tensor", "self_Tensor")
            and kwargs.get("output_size") is None
        ):
            self.record("repeat_interleave")
        elif packet is aten.linalg_cholesky_ex and (len(args) < 3 or args[2]):
            self.record("linalg info check (cholesky)")

    def _mix(self, func, host: torch.Tensor, inputs: list[torch.Tensor]) -> None:
        if not self.checking:
            return
        ours, via = responsible(limit=5, root=self.root)
        places = ", ".join(f"{tuple(t.shape)} {self.placement.get(t, HOST)}" for t in inputs)
        made = self.origin.get(host)
        raise DeviceMixError(
            f"{func}: a host tensor {tuple(host.shape)} {host.dtype}"
            + (f" (made by {made})" if made else "")
            + f" meets tensors on the training device "
            f"(inputs: {places})\n  at " + "\n  from ".join(ours) + (f"\n  via {via}" if via else "")
        )

    @contextlib.contextmanager
    def counting(self):
        """A window (a training step): yields the list its syncs are appended to."""
        self.syncs = []
        try:
            yield self.syncs
        finally:
            self.syncs = None

    def __enter__(self) -> DeviceEmulation:
        self._modes = contextlib.ExitStack()
        self._modes.enter_context(_Functions(self))
        self._modes.enter_context(_Dispatch(self))
        return self

    def __exit__(self, *exc) -> None:
        self._modes.close()
        self._modes = None


def summary(syncs: list[Sync]) -> dict[str, int]:
    """``"kind @ where"`` -> how many times, in order of first appearance."""
    counts: dict[str, int] = {}
    for sync in syncs:
        key = f"{sync.kind} @ {sync.where}" + (f" via {sync.via}" if sync.via else "")
        counts[key] = counts.get(key, 0) + 1
    return counts
