"""Bottleneck adapters: BERT or identity initialisation, only adapters train, hand parameter count, save/load round
trip."""

import copy
import json

import pytest
import torch
from transformers import (
    AutoModelForMaskedLM,
    BertConfig,
    BertForMaskedLM,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
)

from distalign.models.adapters import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    BottleneckAdapter,
    adapter_state_dict,
    add_bottleneck_adapters,
    load_adapters,
    load_masked_lm_with_adapters,
    save_pretrained_with_adapters,
)

D, LAYERS = 32, 2


def tiny(kind):
    torch.manual_seed(0)
    common = dict(
        vocab_size=50,
        hidden_size=D,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        intermediate_size=48,
        max_position_embeddings=40,
    )
    if kind == "xlmr":
        return XLMRobertaForMaskedLM(XLMRobertaConfig(**common)).eval()
    return BertForMaskedLM(BertConfig(**common)).eval()


IDS = torch.randint(5, 50, (3, 7), generator=torch.Generator().manual_seed(1))


def logits(model):
    with torch.no_grad():
        return model(input_ids=IDS).logits


def train_steps(model, steps=3):
    """A few AdamW steps on a masked-LM loss; returns the model."""
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.05, weight_decay=0.0)
    model.train()
    for _ in range(steps):
        model(input_ids=IDS, labels=IDS).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.eval()


def test_bert_init_draws_both_projections_from_n_0_002_with_zero_biases():
    """adapter-transformers' default ``init_weights="bert"`` (BabelBERT's PfeifferConfig): not the identity."""
    torch.manual_seed(0)
    adapter = BottleneckAdapter(768, reduction_factor=16)
    for linear in (adapter.down, adapter.up):
        assert linear.weight.std().item() == pytest.approx(0.02, rel=0.05)
        assert abs(linear.weight.mean().item()) < 0.002 and not linear.bias.any()
    model = tiny("xlmr")
    before = logits(model)
    add_bottleneck_adapters(model)
    assert not torch.allclose(logits(model), before, atol=1e-6)
    with pytest.raises(ValueError, match="init"):
        BottleneckAdapter(768, init="zeros")


@pytest.mark.parametrize("kind", ["xlmr", "bert"])
def test_identity_at_init_and_only_adapters_trainable(kind):
    model = tiny(kind)
    before = logits(model)
    adapters = add_bottleneck_adapters(model, reduction_factor=16, init="identity")
    assert len(adapters) == LAYERS and all(isinstance(a, BottleneckAdapter) for a in adapters)
    assert torch.allclose(logits(model), before, atol=0, rtol=0)
    trainable = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(".output.adapter." in name for name in trainable)
    assert trainable == set(adapter_state_dict(model))
    # 2·L·(d·d/16) weights + L·(d/16 + d) biases, by hand
    m = D // 16
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == 2 * LAYERS * D * m + LAYERS * (m + D)


def randomised(adapters):
    g = torch.Generator().manual_seed(2)
    for adapter in adapters:
        for p in adapter.parameters():
            p.data = torch.randn(p.shape, generator=g) * 0.3
    return g


def bottleneck(a, h):
    return torch.relu(h @ a.down.weight.T + a.down.bias) @ a.up.weight.T + a.up.bias


@pytest.mark.parametrize("kind", ["xlmr", "bert"])
def test_pfeiffer_adapter_sits_after_the_feed_forward_add_and_norm(kind):
    """Pfeiffer (BabelBERT's PfeifferConfig): LN(ffn + x + A(LN(ffn + x))), the layer's own LN re-used."""
    model = tiny(kind)
    adapters = add_bottleneck_adapters(model, reduction_factor=8)  # placement defaults to pfeiffer
    g = randomised(adapters)
    output, a = model.base_model.encoder.layer[0].output, adapters[0]
    intermediate, x = torch.randn(4, output.dense.in_features, generator=g), torch.randn(4, D, generator=g)
    z = output.dense(intermediate) + x  # eval mode: dropout is the identity
    ln = torch.nn.functional.layer_norm
    inner = ln(z, (D,), output.LayerNorm.weight, output.LayerNorm.bias, output.LayerNorm.eps)
    expected = ln(z + bottleneck(a, inner), (D,), output.LayerNorm.weight, output.LayerNorm.bias, output.LayerNorm.eps)
    with torch.no_grad():
        assert torch.allclose(output(intermediate, x), expected, atol=1e-5)
        assert not torch.allclose(output(intermediate, x), inner, atol=1e-3)  # the adapter does act
        assert torch.allclose(output.dense(intermediate), intermediate @ output.dense.weight.T + output.dense.bias)


def test_houlsby_adapter_sits_before_the_skip_connection():
    """Houlsby: h + A(h) on the FFN projection's output, before the skip connection and the LayerNorm."""
    model = tiny("xlmr")
    adapters = add_bottleneck_adapters(model, reduction_factor=8, placement="houlsby")
    g = randomised(adapters)
    h = torch.randn(4, D, generator=g)
    a = adapters[0]
    assert torch.allclose(a(h), h + bottleneck(a, h), atol=1e-5)
    dense = model.base_model.encoder.layer[0].output.dense
    x = torch.randn(4, dense.in_features, generator=g)
    assert torch.allclose(dense(x), a(x @ dense.weight.T + dense.bias), atol=1e-5)
    # a deep copy calls its own adapters, not the original's
    clone = copy.deepcopy(model)
    clone.base_model.encoder.layer[0].output.adapter.up.bias.data.add_(1.0)
    assert not torch.allclose(clone.base_model.encoder.layer[0].output.dense(x), dense(x))
    with pytest.raises(ValueError, match="placement"):
        add_bottleneck_adapters(tiny("bert"), placement="after")


@pytest.mark.parametrize("kind", ["xlmr", "bert"])
def test_optimizer_steps_change_only_adapters(kind):
    model = tiny(kind)
    add_bottleneck_adapters(model)
    start = {name: p.detach().clone() for name, p in model.named_parameters()}
    train_steps(model)
    for name, p in model.named_parameters():
        changed = not torch.equal(p, start[name])
        assert changed == (".output.adapter." in name), name


@pytest.mark.parametrize("kind", ["xlmr", "bert"])
@pytest.mark.parametrize("placement", ["pfeiffer", "houlsby"])
def test_save_and_load_round_trip(kind, placement, tmp_path):
    base = tiny(kind)
    base_logits = logits(base)
    model = copy.deepcopy(base)
    add_bottleneck_adapters(model, reduction_factor=16, non_linearity="gelu", placement=placement)
    train_steps(model)
    adapted = logits(model)
    assert not torch.allclose(adapted, base_logits)

    save_pretrained_with_adapters(model, tmp_path)
    assert json.loads((tmp_path / ADAPTER_CONFIG).read_text()) == {
        "reduction_factor": 16,
        "non_linearity": "gelu",
        "placement": placement,
    }
    assert (tmp_path / ADAPTER_WEIGHTS).is_file()
    loaded = load_masked_lm_with_adapters(str(tmp_path)).eval()
    assert torch.allclose(logits(loaded), adapted, atol=1e-6)
    assert {n for n, p in loaded.named_parameters() if p.requires_grad} == set(adapter_state_dict(model))
    # the directory is a plain HF model too: without the loader it is the unadapted (frozen) base
    plain, info = AutoModelForMaskedLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["unexpected_keys"] and not info["missing_keys"]
    assert torch.allclose(logits(plain.eval()), base_logits, atol=1e-6)


def test_load_adapters_state_round_trip_and_mismatch():
    source = tiny("xlmr")
    add_bottleneck_adapters(source)
    train_steps(source, steps=2)
    target = tiny("xlmr")
    add_bottleneck_adapters(target)
    load_adapters(target, adapter_state_dict(source))
    assert torch.allclose(logits(target), logits(source), atol=1e-6)
    state = adapter_state_dict(source)
    state.pop(next(iter(state)))
    with pytest.raises(ValueError, match="1 missing"):
        load_adapters(target, state)


def test_bad_arguments_raise(tmp_path):
    with pytest.raises(ValueError, match="reduction_factor=64"):
        add_bottleneck_adapters(tiny("xlmr"), reduction_factor=64)
    with pytest.raises(ValueError, match="non_linearity='nope'"):
        add_bottleneck_adapters(tiny("xlmr"), non_linearity="nope")
    model = tiny("bert")
    add_bottleneck_adapters(model)
    with pytest.raises(ValueError, match="already has adapters"):
        add_bottleneck_adapters(model)
    with pytest.raises(ValueError, match="not a BERT/XLM-R-style encoder"):
        add_bottleneck_adapters(torch.nn.Linear(2, 2))
    tiny("xlmr").save_pretrained(tmp_path)
    (tmp_path / ADAPTER_CONFIG).write_text("{}")
    with pytest.raises(ValueError, match="not an adapter config"):
        load_masked_lm_with_adapters(str(tmp_path))
