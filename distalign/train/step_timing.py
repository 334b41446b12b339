"""Where a worker's training steps spend their time, logged as ``perf/...`` at ``train.log_every``.

Each step is cut into phases by marks: ``data_wait`` (blocked on the streams' iterators, Ray Data's
or a local one, and trimming each batch to its longest row), ``forward_backward`` (the batches' copy to the device,
forward and backward of every micro-batch) and ``optimizer`` (clipping, the optimizer and schedule step; DeepSpeed's
step with its ZeRO collectives). ``step_ms`` is the wall time per step, the phases' sum plus what lies between them (the
objectives' per-step state hooks).

No host synchronisation is added per step. On CPU the marks read the wall clock. On a GPU the
device phases are CUDA events, read when the window is logged: the window's last event is waited
for then, a wait the loop's reading of the losses makes anyway; ``data_wait`` stays host time.

Collectives: DDP overlaps its gradient all-reduce with the backward pass; its own sampled timers
(the first 10 steps, then every 100th: ``DistributedDataParallel._get_ddp_logging_data``) give
``allreduce_ms`` and ``allreduce_exposed_ms`` (the part not hidden behind backward compute) of the
latest sampled step. DeepSpeed times its collectives only with its synchronising timers
(``wall_clock_breakdown``, the comms logger), which would add a sync per step: under DeepSpeed
the collectives stay inside ``forward_backward`` (gradient reduction) and ``optimizer`` (ZeRO's
gathers) and no collective metric is logged.

Throughput counts the positions of every ``attention_mask*`` tensor in the step's batches as trimmed
(``tokens``, padding included: the model computes them), the real tokens among them, and the rows
of those tensors (``sequences``: a constraint pair is two). Model FLOPs utilisation (GPU only): the steps'
model FLOPs (``distalign.train.model_flops``: every matrix product, attention's and the MLM head's at the
labelled positions included, on the real tokens of each step's batches) per second, against the device's dense
bf16 peak (``PEAK_BF16_TFLOPS``, also for fp32 runs).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from distalign.train.model_flops import ModelFlops, count_step

Mark = Callable[[str], None]


def no_mark(phase: str) -> None:
    """The engines' ``mark`` when nobody times them."""


# Dense (not sparse) bf16 tensor-core peak, TFLOP/s, by a name in torch.cuda.get_device_name, from NVIDIA's
# data sheets (H100/H200: "NVIDIA H100 Tensor Core GPU" and "NVIDIA H200" data sheets; A100: "NVIDIA A100
# Tensor Core GPU"; L40S, A10G, L4: their product data sheets). More specific names come first.
PEAK_BF16_TFLOPS = {
    "H100 PCIe": 756.0,
    "H200": 989.0,
    "H100": 989.0,
    "A100": 312.0,
    "L40S": 362.0,
    "A10G": 125.0,
    "L4": 121.0,
}
HOST_PHASES = ("data_wait",)  # measured on the host clock also on a GPU
DEVICE_PHASES = ("forward_backward", "optimizer")


def peak_flops(device: torch.device) -> float | None:
    """The device's dense bf16 peak in FLOP/s; None on CPU or for a GPU the table does not name."""
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((tflops * 1e12 for key, tflops in PEAK_BF16_TFLOPS.items() if key in name), None)


@dataclass
class Window:
    """What one worker's steps since the last log add up to (seconds, counts)."""

    steps: int = 0
    step_s: float = 0.0
    phase_s: dict[str, float] = field(default_factory=dict)
    sequences: int = 0
    tokens: int = 0
    padding: int = 0
    flops: float = 0.0  # model FLOPs (``ModelFlops.flops``)


def window_metrics(window: Window, peak: float | None) -> dict[str, float]:
    """One worker's ``perf/`` metrics of a window; MFU where the device's ``peak`` FLOP/s is known."""
    if window.steps == 0:
        return {}
    seconds = max(window.step_s, 1e-9)
    metrics = {"perf/step_ms": 1e3 * window.step_s / window.steps}
    metrics |= {f"perf/{phase}_ms": 1e3 * s / window.steps for phase, s in window.phase_s.items()}
    metrics["perf/tokens_per_s_per_worker"] = window.tokens / seconds
    metrics["perf/sequences_per_s_per_worker"] = window.sequences / seconds
    metrics["perf/padding_share"] = window.padding / max(window.tokens, 1)
    if peak:
        metrics["perf/mfu"] = window.flops / seconds / peak
    return metrics


def totals(metrics: dict[str, float], world_size: int) -> dict[str, float]:
    """The whole run's tokens/s and sequences/s from the per-worker means (averaged across ranks)."""
    return {
        f"perf/{unit}_per_s": metrics[f"perf/{unit}_per_s_per_worker"] * world_size
        for unit in ("tokens", "sequences")
        if f"perf/{unit}_per_s_per_worker" in metrics
    }


def ddp_allreduce(wrapped: torch.nn.Module | None) -> dict[str, float]:
    """DDP's own timing of its latest sampled step's gradient all-reduce (ns in DDP's logging data)."""
    if not isinstance(wrapped, torch.nn.parallel.DistributedDataParallel):
        return {}
    data = wrapped._get_ddp_logging_data()
    if "backward_comm_time" not in data:  # no step sampled yet
        return {}
    comm, overlap = data["backward_comm_time"], data.get("backward_compute_comm_overlap_time", 0)
    return {"perf/allreduce_ms": comm / 1e6, "perf/allreduce_exposed_ms": max(comm - overlap, 0) / 1e6}


class StepTimer:
    """One worker's step phases, tokens and times since the last ``read``: ``begin`` a step, ``mark`` the end
    of each phase (the engine marks its own), ``end`` it; marks outside a begun step are ignored (a
    recipe's ``step`` called on its own, as the benchmarks do)."""

    def __init__(self, device: torch.device, model_flops: ModelFlops, ddp_module: torch.nn.Module | None = None):
        self.device, self.model_flops, self.ddp_module = device, model_flops, ddp_module
        self.cuda = device.type == "cuda"
        self.peak = peak_flops(device)
        self.window = Window()
        self._events: list[tuple[str, torch.cuda.Event, torch.cuda.Event]] = []  # device phases, read at log time
        self._window_start: float | None = None
        self._between_steps = 0.0  # host time outside steps within the window (logging, evaluation, checkpoints)
        self._last_end: float | None = None
        self._last: tuple[float, torch.cuda.Event | None] | None = None  # the step's latest mark

    def begin(self) -> None:
        now = time.perf_counter()
        if self._window_start is None:
            self._window_start = now
        elif self._last_end is not None:
            self._between_steps += now - self._last_end
        self._last = (now, None)

    def mark(self, phase: str) -> None:
        if self._last is None:
            return
        now = time.perf_counter()
        event = None
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
        start, start_event = self._last
        if event is not None and phase not in HOST_PHASES and start_event is not None:  # event: set when cuda
            self._events.append((phase, start_event, event))
        else:
            self.window.phase_s[phase] = self.window.phase_s.get(phase, 0.0) + now - start
        self._last = (now, event)

    def count(self, micro_batches: list) -> None:
        counts = count_step(micro_batches)
        self.window.sequences += counts.sequences
        self.window.tokens += counts.positions
        self.window.padding += counts.padding
        self.window.flops += self.model_flops.flops(counts)

    def end(self) -> None:
        self.mark("other")
        self._last, self._last_end = None, time.perf_counter()
        self.window.steps += 1

    def read(self) -> dict[str, float]:
        """This worker's ``perf/`` metrics of the steps since the last read; starts a new window. On a GPU it waits
        for the window's last event (the device's queued work), so that the step time is the device's."""
        if self._events:
            self._events[-1][2].synchronize()
            for phase, start, stop in self._events:
                self.window.phase_s[phase] = self.window.phase_s.get(phase, 0.0) + start.elapsed_time(stop) / 1e3
        if self._window_start is not None:
            self.window.step_s = time.perf_counter() - self._window_start - self._between_steps
        self.window.phase_s.pop("other", None)  # the rest of step_ms; not a phase of its own
        metrics = window_metrics(self.window, self.peak) | ddp_allreduce(self.ddp_module)
        if self.cuda and self.window.steps:
            metrics["perf/peak_memory_gib"] = torch.cuda.max_memory_allocated(self.device) / 2**30
        self.window, self._events = Window(), []
        self._window_start = self._last_end = None
        self._between_steps = 0.0
        return metrics
