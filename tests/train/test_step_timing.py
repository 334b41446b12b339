"""The ``perf/`` metrics: their arithmetic against hand computations, and the timer on CPU and (where present) CUDA.

The CUDA case is marked ``gpu`` (skipped without a GPU): ``make gpu-check`` runs it on a GPU node.
"""

from __future__ import annotations

import time

import pytest
import torch

from distalign.train.model_flops import ModelFlops, count_step
from distalign.train.step_timing import (
    StepTimer,
    Window,
    ddp_allreduce,
    peak_flops,
    totals,
    window_metrics,
)


def mask(width: int, lengths: list[int]) -> torch.Tensor:
    return (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()


def test_count_step_counts_every_attention_mask():
    # a constraint batch of 2 pairs (two masks of width 4) and a corpus batch of 3 sentences of width 5
    constraints = {
        "attention_mask1": mask(4, [3, 4]),
        "attention_mask2": mask(4, [2, 3]),
        "input_ids1": torch.zeros(2, 4),
        "synset": torch.zeros(2),
    }
    corpus = {"attention_mask": mask(5, [5, 2, 1]), "input_ids": torch.zeros(3, 5)}
    counts = count_step([{"constraints": constraints, "corpus": corpus}] * 2)
    # per micro-batch: 2 + 2 + 3 = 7 sequences, 8 + 8 + 15 = 31 positions, 7 + 5 + 8 = 20 real tokens,
    # 9 + 16 + 4 + 9 + 25 + 4 + 1 = 68 squared lengths; no labels
    assert (counts.sequences, counts.positions, counts.padding) == (14, 62, 22)
    assert (counts.real_tokens, counts.squared_lengths, counts.labelled) == (40, 136, 0)


def test_window_metrics_against_a_hand_computation():
    window = Window(
        steps=4,
        step_s=2.0,
        phase_s={"data_wait": 0.4, "forward_backward": 1.2, "optimizer": 0.2},
        sequences=100,
        tokens=8000,
        padding=2000,
        flops=4.8e7,
    )
    metrics = window_metrics(window, peak=1e9)
    assert metrics["perf/step_ms"] == pytest.approx(500.0)
    assert metrics["perf/data_wait_ms"] == pytest.approx(100.0)
    assert metrics["perf/forward_backward_ms"] == pytest.approx(300.0)
    assert metrics["perf/optimizer_ms"] == pytest.approx(50.0)
    assert metrics["perf/tokens_per_s_per_worker"] == pytest.approx(4000.0)
    assert metrics["perf/sequences_per_s_per_worker"] == pytest.approx(50.0)
    assert metrics["perf/padding_share"] == pytest.approx(0.25)
    # 4.8e7 model FLOPs in 2 s = 2.4e7 FLOP/s against a peak of 1e9
    assert metrics["perf/mfu"] == pytest.approx(0.024)
    assert "perf/mfu" not in window_metrics(window, None)  # no peak (CPU): no MFU
    assert window_metrics(Window(), 1e9) == {}
    assert totals(metrics, 3) == {
        "perf/tokens_per_s": pytest.approx(12000.0),
        "perf/sequences_per_s": pytest.approx(150.0),
    }


def test_no_peak_on_cpu():
    assert peak_flops(torch.device("cpu")) is None


def test_ddp_allreduce_reads_ddps_own_timers(gloo_group):
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
    assert ddp_allreduce(model) == {}  # nothing sampled yet
    for _ in range(2):
        model(torch.randn(4, 8)).sum().backward()
    metrics = ddp_allreduce(model)
    assert metrics["perf/allreduce_ms"] >= metrics["perf/allreduce_exposed_ms"] >= 0
    assert ddp_allreduce(torch.nn.Linear(2, 2)) == {}  # not DDP (DeepSpeed): nothing to read


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_timer_splits_steps_into_phases(device):
    """A plain loop timed as the recipe times it; the data wait is a sleep of known length."""
    device = torch.device(device)
    model = torch.nn.Sequential(torch.nn.Embedding(100, 64), torch.nn.Linear(64, 64), torch.nn.Linear(64, 100))
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters())
    timer = StepTimer(device, ModelFlops(encoder_weights=2 * 64 * 64, layers=0, attention_width=0, head_weights=0))
    timer.mark("forward_backward")  # outside a step: ignored
    steps, wait_s = 5, 0.01
    batch = {"corpus": {"input_ids": torch.randint(0, 100, (8, 16)), "attention_mask": mask(16, [12] * 8)}}
    started = time.perf_counter()
    for _ in range(steps):
        timer.begin()
        time.sleep(wait_s)
        timer.mark("data_wait")
        timer.count([batch])
        model(batch["corpus"]["input_ids"].to(device)).logsumexp(-1).mean().backward()
        timer.mark("forward_backward")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        timer.mark("optimizer")
        timer.end()
        time.sleep(0.05)  # outside the steps (logging, evaluation): not step time, but for the last one
    metrics = timer.read()  # (the window closes here, where the loop waits for the device)
    elapsed_ms = (time.perf_counter() - started) * 1e3
    phases = metrics["perf/data_wait_ms"] + metrics["perf/forward_backward_ms"] + metrics["perf/optimizer_ms"]
    assert wait_s * 1e3 <= metrics["perf/data_wait_ms"] < metrics["perf/step_ms"]
    assert phases <= metrics["perf/step_ms"] * 1.05
    assert steps * metrics["perf/step_ms"] <= elapsed_ms - (steps - 1) * 50
    assert metrics["perf/tokens_per_s_per_worker"] == pytest.approx(8 * 16 * 1e3 / metrics["perf/step_ms"], rel=1e-6)
    assert metrics["perf/padding_share"] == pytest.approx(0.25)
    if device.type == "cuda":
        assert metrics["perf/peak_memory_gib"] > 0
        assert ("perf/mfu" in metrics) == (peak_flops(device) is not None)
    else:
        assert "perf/mfu" not in metrics and "perf/peak_memory_gib" not in metrics
    assert timer.read() == {}  # a new window
