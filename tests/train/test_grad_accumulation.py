"""Gradient accumulation: k micro-batches make the same optimizer step as one batch k times as large (for a
loss that is a mean over rows), the returned losses are the micro-batches' mean, and the resumed stream
position counts micro-batches."""

from __future__ import annotations

import torch
from conftest import QUICKSTART
from torch import nn

from distalign.config import load_config
from distalign.train.engine import DDPEngine, deepspeed_settings


class RowMeanModel(nn.Module):
    """A linear regression whose loss is the mean over the rows of its batch."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 1)

    def forward(self, batches):
        batch = batches["corpus"]
        loss = ((self.linear(batch["x"]).squeeze(-1) - batch["y"]) ** 2).mean()
        return {"toy": loss, "loss": loss}


def test_accumulated_micro_batches_step_like_one_large_batch(gloo_group):
    config = load_config(QUICKSTART, ["train.warmup_steps=0", "train.lr=0.1"]).train
    x, y = torch.randn(8, 4), torch.randn(8)
    halves = [{"corpus": {"x": x[i : i + 4], "y": y[i : i + 4]}} for i in (0, 4)]
    accumulated = DDPEngine(
        RowMeanModel(), config, config.max_steps, find_unused_parameters=False, device=torch.device("cpu")
    )
    whole = DDPEngine(
        RowMeanModel(), config, config.max_steps, find_unused_parameters=False, device=torch.device("cpu")
    )
    losses = accumulated.step(halves)
    expected = whole.step([{"corpus": {"x": x, "y": y}}])

    def first_moments(engine):  # AdamW's exp_avg after one step: (1 - beta1) x the (clipped) gradient
        return [engine.optimizer.state[p]["exp_avg"] for p in engine.module.parameters()]

    for a, b in zip(first_moments(accumulated), first_moments(whole)):
        torch.testing.assert_close(a, b)
    for a, b in zip(accumulated.module.parameters(), whole.module.parameters()):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(losses["loss"], expected["loss"])  # equal halves: the mean of means
    assert not losses["loss"].requires_grad
    # one micro-batch alone has another gradient: the test can tell the two apart
    single = DDPEngine(
        RowMeanModel(), config, config.max_steps, find_unused_parameters=False, device=torch.device("cpu")
    )
    single.step(halves[:1])
    assert not torch.allclose(first_moments(single)[0], first_moments(whole)[0])


def test_deepspeed_accumulates_as_many_micro_batches():
    config = load_config(QUICKSTART, ["train.engine=deepspeed", "train.grad_accum_steps=4"]).train
    assert deepspeed_settings(config).get("gradient_accumulation_steps") == 4


def test_the_step_keeps_the_gradient_norm_before_clipping_on_the_device(gloo_group):
    config = load_config(QUICKSTART, ["train.warmup_steps=0"]).train
    x, y = 100 * torch.randn(8, 4), torch.randn(8)  # large inputs: a norm far past the clipping threshold
    reference = RowMeanModel()
    ((reference.linear(x).squeeze(-1) - y) ** 2).mean().backward()
    expected = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in reference.parameters()]))
    engine = DDPEngine(
        RowMeanModel(), config, config.max_steps, find_unused_parameters=False, device=torch.device("cpu")
    )
    engine.step([{"corpus": {"x": x, "y": y}}])
    assert isinstance(engine.grad_norm, torch.Tensor) and not engine.grad_norm.requires_grad
    torch.testing.assert_close(engine.grad_norm, expected)
    assert expected > 10  # the unclipped norm, not the threshold 1.0
