"""LAMB (You et al. 2020, Algorithm 2) against a hand computation and a plain-Python reference, and its wiring:
``train.optimizer: lamb`` gives both engines a LAMB optimizer, and is refused where ZeRO partitions the tensors."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import QUICKSTART

from distalign.config import ConfigError, load_config
from distalign.models.optimization import parameter_groups
from distalign.train.engine import _optimizer_and_schedule
from distalign.train.lamb import Lamb


def reference_lamb(
    x: list[float], grads: list[list[float]], lr: float, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0
) -> list[float]:
    """Algorithm 2 of the paper, one tensor, element by element in Python floats."""
    b1, b2 = betas
    m, v = [0.0] * len(x), [0.0] * len(x)
    for t, g in enumerate(grads, start=1):
        m = [b1 * mi + (1 - b1) * gi for mi, gi in zip(m, g)]
        v = [b2 * vi + (1 - b2) * gi * gi for vi, gi in zip(v, g)]
        r = [
            (mi / (1 - b1**t)) / (math.sqrt(vi / (1 - b2**t)) + eps) + weight_decay * xi for mi, vi, xi in zip(m, v, x)
        ]
        x_norm, r_norm = math.sqrt(sum(xi * xi for xi in x)), math.sqrt(sum(ri * ri for ri in r))
        trust = x_norm / r_norm if x_norm > 0 and r_norm > 0 else 1.0
        x = [xi - lr * trust * ri for xi, ri in zip(x, r)]
    return x


def lamb_steps(x: list[float], grads: list[list[float]], **settings) -> list[float]:
    param = torch.nn.Parameter(torch.tensor(x, dtype=torch.float64))
    optimizer = Lamb([param], **settings)
    for g in grads:
        param.grad = torch.tensor(g, dtype=torch.float64)
        optimizer.step()
    return param.detach().tolist()


def test_one_step_by_hand():
    # x = (3, 4), ‖x‖ = 5; step 1: bias-corrected m = g, v = g², so r = g/(|g| + ε) + 0.01 x
    r = [0.5 / (0.5 + 1e-6) + 0.03, -1.0 / (1.0 + 1e-6) + 0.04]  # (1.029998, -0.959999)
    trust = 5 / math.hypot(*r)  # 3.551109
    expected = [3 - 0.1 * trust * r[0], 4 - 0.1 * trust * r[1]]  # (2.634236, 4.340906)
    assert expected == pytest.approx([2.634236, 4.340906], abs=1e-6)
    assert lamb_steps([3.0, 4.0], [[0.5, -1.0]], lr=0.1, weight_decay=0.01) == pytest.approx(expected, abs=1e-12)


def test_several_steps_match_the_reference_and_differ_from_adamw():
    grads = [[0.5, -1.0, 0.2], [0.1, 0.3, -0.7], [-0.4, 0.2, 0.9], [1.5, -0.1, 0.0]]
    x = [0.3, -1.2, 2.0]
    ours = lamb_steps(x, grads, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1)
    assert ours == pytest.approx(reference_lamb(x, grads, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1), abs=1e-12)
    param = torch.nn.Parameter(torch.tensor(x, dtype=torch.float64))
    adamw = torch.optim.AdamW([param], lr=0.05, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)
    for g in grads:
        param.grad = torch.tensor(g, dtype=torch.float64)
        adamw.step()
    assert max(abs(a - b) for a, b in zip(ours, param.detach().tolist())) > 1e-3  # the layer-wise scale matters


def test_zero_weights_take_an_unscaled_step():
    # ‖x‖ = 0 (a bias initialised to zero): trust ratio 1, the update is the bias-corrected Adam direction
    assert lamb_steps([0.0, 0.0], [[0.2, -0.4]], lr=0.01) == pytest.approx(
        [-0.01 * 0.2 / (0.2 + 1e-6), 0.01 * 0.4 / (0.4 + 1e-6)], abs=1e-12
    )


def test_config_selects_lamb_for_the_engines():
    model = torch.nn.Linear(3, 2)
    config = load_config(QUICKSTART, ["train.optimizer=lamb", "train.lr=0.0016", "train.weight_decay=0.01"])
    optimizer, _ = _optimizer_and_schedule(model, config.train, config.train.max_steps)
    assert isinstance(optimizer, Lamb)
    assert optimizer.defaults["lr"] == 0.0016 and optimizer.defaults["weight_decay"] == 0.01
    default, _ = _optimizer_and_schedule(model, load_config(QUICKSTART).train, 10)
    assert type(default) is torch.optim.AdamW
    load_config(QUICKSTART, ["train.optimizer=lamb", "train.engine=deepspeed", "train.zero_stage=0"])  # allowed


def test_lamb_is_refused_where_zero_partitions_the_tensors():
    with pytest.raises(ConfigError, match=r"train\.optimizer: LAMB's trust ratio needs whole tensors"):
        load_config(QUICKSTART, ["train.optimizer=lamb", "train.engine=deepspeed", "train.zero_stage=2"])
    with pytest.raises(ConfigError, match=r"train\.optimizer"):
        load_config(QUICKSTART, ["train.optimizer=sgd"])


def tiny_masked_lm() -> torch.nn.Module:
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    return XLMRobertaForMaskedLM(
        XLMRobertaConfig(
            vocab_size=50,
            hidden_size=8,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=16,
            max_position_embeddings=20,
        )
    )


def test_biases_and_layer_norms_are_kept_out_of_weight_decay():
    # BERT, the LAMB reference and the Hugging Face Trainer: no decay (and no trust ratio) on these
    model = tiny_masked_lm()
    decayed, kept = parameter_groups(model, weight_decay=0.1)
    names = {id(p): name for name, p in model.named_parameters()}
    kept_names = {names[id(p)] for p in kept["params"]}
    assert kept_names == {
        name
        for name in names.values()
        if name.endswith("bias") or name.endswith(("LayerNorm.weight", "layer_norm.weight"))
    }
    assert "roberta.encoder.layer.0.attention.output.LayerNorm.weight" in kept_names
    assert "roberta.encoder.layer.0.attention.self.key.weight" in {names[id(p)] for p in decayed["params"]}
    assert (decayed["weight_decay"], kept["weight_decay"], kept["adapt"]) == (0.1, 0.0, False)


def test_an_adamw_step_decays_weights_but_not_biases_or_layer_norms():
    model = tiny_masked_lm()
    config = load_config(QUICKSTART, ["train.lr=0.1", "train.weight_decay=0.5", "train.warmup_steps=0"])
    optimizer, _ = _optimizer_and_schedule(model, config.train, 10)
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # the step is decay alone: x <- x (1 - lr * wd)
    optimizer.step()
    after = dict(model.named_parameters())
    norm = "roberta.encoder.layer.0.output.LayerNorm.weight"
    assert torch.equal(after[norm], before[norm]) and torch.equal(after["lm_head.bias"], before["lm_head.bias"])
    dense = "roberta.encoder.layer.0.output.dense.weight"
    assert torch.allclose(after[dense], before[dense] * (1 - 0.1 * 0.5))


def test_lamb_takes_the_plain_adam_step_for_a_group_it_does_not_adapt():
    weight = torch.nn.Parameter(torch.tensor([3.0, 4.0], dtype=torch.float64))
    bias = torch.nn.Parameter(torch.tensor([3.0, 4.0], dtype=torch.float64))
    optimizer = Lamb(
        [{"params": [weight]}, {"params": [bias], "weight_decay": 0.0, "adapt": False}], lr=0.1, weight_decay=0.01
    )
    weight.grad = torch.tensor([0.5, -1.0], dtype=torch.float64)
    bias.grad = weight.grad.clone()
    optimizer.step()
    assert weight.detach().tolist() == pytest.approx([2.634236, 4.340906], abs=1e-6)  # test_one_step_by_hand
    # step 1: bias-corrected m = g, v = g², so the Adam step is lr * g / (|g| + ε), no decay, trust ratio 1
    assert bias.detach().tolist() == pytest.approx(
        [3 - 0.1 * 0.5 / (0.5 + 1e-6), 4 + 0.1 * 1.0 / (1.0 + 1e-6)], abs=1e-12
    )
