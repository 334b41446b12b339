"""The MLM head runs at the labelled positions only (``labelled_logits``): the loss and every gradient are those of
the full-logit loss (fp32, BERT- and XLM-R-style tiny models, with adapters, and for TLM), and a model whose head
is unknown falls back to every position's logits."""

from __future__ import annotations

import pytest
import torch
from transformers import (
    BertConfig,
    BertForMaskedLM,
    DistilBertConfig,
    DistilBertForMaskedLM,
    XLMRobertaConfig,
    XLMRobertaForMaskedLM,
)

from distalign.models.adapters import add_bottleneck_adapters
from distalign.models.language_embeddings import known_lm_head
from distalign.objectives.mlm import IGNORE_INDEX, MLMObjective, masked_lm_loss
from distalign.objectives.tlm import TLMObjective, model_position_ids
from distalign.train.module import TrainingModule

V, T = 50, 7
TINY = dict(
    vocab_size=V,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=T + 4,
)


def tiny(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "bert":
        return BertForMaskedLM(BertConfig(**TINY))
    if kind == "distilbert":  # neither lm_head nor cls: vocab_transform / vocab_projector
        return DistilBertForMaskedLM(
            DistilBertConfig(vocab_size=V, dim=16, n_layers=2, n_heads=2, hidden_dim=32, max_position_embeddings=T + 4)
        )
    model = XLMRobertaForMaskedLM(XLMRobertaConfig(**TINY, pad_token_id=1))
    if kind == "xlmr+adapters":
        add_bottleneck_adapters(model, reduction_factor=4)
        for name, p in model.named_parameters():  # adapters start as the identity: perturb them to matter
            if "adapter" in name:
                torch.nn.init.normal_(p, std=0.1)
    return model


def corpus_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (4, T), generator=g)
    attention = torch.ones(4, T, dtype=torch.long)
    attention[1, -2:] = 0
    ids[1, -2:] = 1
    labels = torch.where((torch.rand(4, T, generator=g) < 0.3) & attention.bool(), ids, IGNORE_INDEX)
    labels[2] = IGNORE_INDEX  # a row with nothing to predict
    labels[0, 0] = ids[0, 0]  # at least one label
    return {"masked_ids": ids, "attention_mask": attention, "labels": labels}


def loss_and_grads(module: torch.nn.Module, loss_fn) -> tuple[float, dict[str, torch.Tensor]]:
    module.zero_grad(set_to_none=True)
    loss = loss_fn()
    loss.backward()
    return loss.item(), {name: p.grad.clone() for name, p in module.named_parameters() if p.grad is not None}


def assert_same(ours, reference):
    (loss, grads), (ref_loss, ref_grads) = ours, reference
    assert loss == pytest.approx(ref_loss, abs=1e-6, rel=1e-6)
    assert grads.keys() == ref_grads.keys() and grads
    for name in grads:
        torch.testing.assert_close(grads[name], ref_grads[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("kind", ["bert", "xlmr", "xlmr+adapters", "distilbert"])
def test_mlm_loss_and_gradients_are_the_full_logit_ones(kind):
    masked_lm = tiny(kind).eval()  # no dropout: both sides run the same network
    module = TrainingModule(masked_lm, {"mlm": MLMObjective()}, {"mlm": 1.0})
    batch = corpus_batch()
    ours = loss_and_grads(module, lambda: module({"corpus": batch})["mlm"])
    full = loss_and_grads(
        module,
        lambda: masked_lm_loss(
            masked_lm(input_ids=batch["masked_ids"], attention_mask=batch["attention_mask"]).logits, batch["labels"]
        ),
    )
    assert_same(ours, full)
    assert (known_lm_head(masked_lm) is None) == (kind == "distilbert")


def test_the_head_sees_only_the_labelled_positions():
    masked_lm = tiny("xlmr")
    seen = []
    known_lm_head(masked_lm).register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].shape))
    batch = corpus_batch()
    MLMObjective()(TrainingModule(masked_lm, {}, {}), batch)
    assert seen == [torch.Size([int((batch["labels"] != IGNORE_INDEX).sum()), 16])]


def test_a_batch_without_labels_gives_zero_still_attached_to_the_head():
    masked_lm = tiny("bert")
    batch = corpus_batch()
    batch["labels"] = torch.full_like(batch["labels"], IGNORE_INDEX)
    loss = MLMObjective()(TrainingModule(masked_lm, {}, {}), batch)
    loss.backward()  # DDP without find_unused_parameters needs every head parameter in the graph
    assert loss.item() == 0.0 and known_lm_head(masked_lm).predictions.decoder.weight.grad is not None


@pytest.mark.parametrize("language_embeddings", [True, False])
def test_tlm_loss_and_gradients_are_the_full_logit_ones(language_embeddings):
    masked_lm = tiny("xlmr").eval()
    objective = TLMObjective(16, 2, language_embeddings=language_embeddings, reset_positions=True)
    if language_embeddings:
        torch.nn.init.normal_(objective.language_embeddings.embedding.weight, std=0.1)
    module = TrainingModule(masked_lm, {"tlm": objective}, {"tlm": 1.0})
    batch = corpus_batch(1) | {"lang_ids": torch.randint(0, 2, (4, T)), "positions": torch.arange(T).repeat(4, 1)}
    ours = loss_and_grads(module, lambda: module({"parallel": batch})["tlm"])

    def full_logit_loss():  # TLM's inputs as it builds them, then every position's logits
        ids, attention = batch["masked_ids"], batch["attention_mask"]
        inputs = (
            {"inputs_embeds": objective.language_embeddings(masked_lm, ids, batch["lang_ids"])}
            if language_embeddings
            else {"input_ids": ids}
        )
        logits = masked_lm(
            **inputs,
            position_ids=model_position_ids(masked_lm, batch["positions"], attention),
            attention_mask=attention,
        ).logits
        return masked_lm_loss(logits, batch["labels"])

    assert_same(ours, loss_and_grads(module, full_logit_loss))
