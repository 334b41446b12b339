"""The engines' GPU settings, checked where they can be on CPU: AdamW fused only where every parameter is on a CUDA
device, and ``train.torch_compile``'s compiled layers training to the eager losses under the same parameter names."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from conftest import QUICKSTART
from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

from distalign.config import ConfigError, TrainConfig, load_config
from distalign.objectives.mlm import IGNORE_INDEX, MLMObjective
from distalign.train.engine import build_engine, fused_on
from distalign.train.module import TrainingModule


def tiny_module() -> TrainingModule:
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=60,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=24,
        pad_token_id=1,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )  # the same function twice
    return TrainingModule(XLMRobertaForMaskedLM(config), {"mlm": MLMObjective()}, {"mlm": 1.0})


def corpus_batch(width: int, seed: int) -> dict[str, dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 60, (4, width), generator=g)
    labels = torch.where(torch.rand(4, width, generator=g) < 0.3, ids, IGNORE_INDEX)
    labels[0, 1] = ids[0, 1]
    return {"corpus": {"masked_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}}


def test_adamw_is_fused_only_where_every_parameter_is_on_cuda(gloo_group):
    on_cuda, on_cpu = SimpleNamespace(device=torch.device("cuda", 0)), torch.nn.Parameter(torch.zeros(2))
    assert fused_on([{"params": [on_cuda]}, {"params": [on_cuda]}]) is True
    assert fused_on([{"params": [on_cuda]}, {"params": [on_cpu]}]) is None
    assert fused_on([{"params": []}]) is None
    engine = build_engine(tiny_module(), TrainConfig(engine="ddp", max_steps=1), 1, True, torch.device("cpu"))
    assert not engine.optimizer.defaults["fused"]  # on CPU: PyTorch's default (foreach)


@pytest.mark.heavy  # compiling the layers' forward and backward takes 30-60 s on 2 cores
def test_compiled_layers_train_to_the_eager_losses(gloo_group):
    batches = [corpus_batch(width, seed) for seed, width in enumerate((9, 12, 7))]  # widths vary, as trimmed ones do
    losses, names = {}, {}
    for compiled in (False, True):
        cfg = TrainConfig(engine="ddp", torch_compile=compiled, lr=1e-3, warmup_steps=0, max_steps=len(batches))
        engine = build_engine(tiny_module(), cfg, cfg.max_steps, True, torch.device("cpu"))
        losses[compiled] = [engine.step([batch])["loss"].item() for batch in batches]
        names[compiled] = list(engine.module.state_dict())
        layers = engine.module.masked_lm.base_model.encoder.layer
        assert all((layer._compiled_call_impl is not None) == compiled for layer in layers)
    assert losses[True] == pytest.approx(losses[False], rel=1e-4)
    assert losses[False][0] != losses[False][2]  # the steps trained on different batches
    assert names[True] == names[False]  # checkpoints keep their keys


def test_compiled_layers_are_refused_under_zero3():
    with pytest.raises(ConfigError, match=r"train\.torch_compile: ZeRO-3 gathers"):
        load_config(QUICKSTART, ["train.engine=deepspeed", "train.zero_stage=3", "train.torch_compile=true"])
    assert load_config(QUICKSTART, ["train.engine=deepspeed", "train.zero_stage=2", "train.torch_compile=true"])
