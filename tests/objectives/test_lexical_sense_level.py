"""Sense-level InfoNCE against info_nce on hand-pooled states of a tiny XLM-R wrapped in TrainingModule."""

import pytest
import torch
from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

from distalign.models.encoder import Encoder
from distalign.objectives.lexical import LexicalConfig, LexicalObjective, info_nce, sense_info_nce
from distalign.train.module import TrainingModule


def local_lexical(temperature: float, gloss_weight: float) -> LexicalObjective:
    """The objective with each worker's own negatives (one process here)."""
    return LexicalObjective(LexicalConfig(temperature=temperature, gloss_weight=gloss_weight, global_negatives=False))


T = 10
SYNSETS = torch.tensor([0, 1, 0, 2, 1])


def tiny_masked_lm():
    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=40,
    )
    return XLMRobertaForMaskedLM(config).eval()


def side(seed, word_lengths, gloss_lengths):
    """Rows laid out as <s> word </s></s> gloss </s> <pad>...; a gloss length of 0 means the word alone."""
    g = torch.Generator().manual_seed(seed)
    n = len(word_lengths)
    ids = torch.full((n, T), 1)
    attention, word, gloss = (torch.zeros(n, T, dtype=torch.long) for _ in range(3))
    for row, (w, gl) in enumerate(zip(word_lengths, gloss_lengths)):
        length = 1 + w + 1 + (1 + gl + 1 if gl else 0)
        ids[row, :length] = torch.randint(5, 50, (length,), generator=g)
        attention[row, :length] = 1
        word[row, 1 : 1 + w] = 1
        gloss[row, 3 + w : 3 + w + gl] = 1
    return ids, attention, word, gloss


def constraint_batch():
    batch = {"synset": SYNSETS}
    for name, (seed, words, glosses) in {
        "1": (1, [1, 2, 3, 1, 2], [3, 0, 2, 4, 1]),
        "2": (2, [2, 1, 1, 3, 2], [2, 3, 0, 1, 4]),
    }.items():
        for key, value in zip(("input_ids", "attention_mask", "word_mask", "gloss_mask"), side(seed, words, glosses)):
            batch[key + name] = value
    return batch


def hand_pooled(masked_lm, ids, attention, mask, layer):
    """Independent: one loop over rows averaging the states at the marked positions."""
    states = masked_lm.base_model(input_ids=ids, attention_mask=attention, output_hidden_states=True).hidden_states[
        layer
    ]
    return torch.stack([states[row, mask[row].bool()].mean(0) for row in range(len(ids))])


@pytest.mark.parametrize("layer", [-1, 1])
@pytest.mark.parametrize("gloss_weight", [0.0, 0.5])
def test_loss_matches_info_nce_on_hand_pooled_states(layer, gloss_weight):
    masked_lm, batch = tiny_masked_lm(), constraint_batch()
    model = TrainingModule(masked_lm, {"lexical": local_lexical(0.1, gloss_weight)}, {"lexical": 1.0}, word_layer=layer)
    with torch.no_grad():
        got = model({"constraints": batch})["lexical"]
        pooled = {
            f"{kind}{s}": hand_pooled(
                masked_lm, batch[f"input_ids{s}"], batch[f"attention_mask{s}"], batch[f"{kind}_mask{s}"], layer
            )
            for kind in ("word", "gloss")
            for s in "12"
        }
    expected = info_nce(pooled["word1"], pooled["word2"], SYNSETS, 0.1)
    if gloss_weight:
        both = [0, 3, 4]  # rows 1 and 2 lack a gloss on one side
        expected = expected + gloss_weight * info_nce(
            pooled["gloss1"][both], pooled["gloss2"][both], SYNSETS[both], 0.1
        )
    assert got.item() == pytest.approx(expected.item(), rel=1e-5)


def test_gloss_term_changes_the_loss_and_one_encoder_pass_for_both_sides():
    masked_lm, batch = tiny_masked_lm(), constraint_batch()
    calls = []
    masked_lm.base_model.register_forward_hook(lambda *_: calls.append(1))
    model = Encoder(masked_lm)
    with torch.no_grad():
        word_only = local_lexical(0.1, 0.0)(model, batch)
        with_gloss = local_lexical(0.1, 1.0)(model, batch)
    assert len(calls) == 2  # two calls of the objective, both sides in one pass each
    assert with_gloss.item() > word_only.item()  # an InfoNCE term is positive


def test_no_pair_with_both_glosses_leaves_the_word_loss():
    g = torch.Generator().manual_seed(3)
    s1, s2 = torch.randn(3, 4, 6, generator=g), torch.randn(3, 4, 6, generator=g)
    word = torch.tensor([[0, 1, 0, 0]] * 3)
    gloss1 = torch.tensor([[0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 1, 0]])
    gloss2 = torch.tensor([[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 0, 0]])
    synsets = torch.tensor([0, 1, 2])
    got = sense_info_nce(s1, s2, word, word, gloss1, gloss2, synsets, 0.2, gloss_weight=3.0)
    assert got.item() == pytest.approx(info_nce(s1[:, 1], s2[:, 1], synsets, 0.2).item(), rel=1e-6)


def test_gradient_reaches_the_encoder():
    masked_lm, batch = tiny_masked_lm(), constraint_batch()
    model = TrainingModule(masked_lm, {"lexical": local_lexical(0.1, 0.5)}, {"lexical": 1.0})
    model({"constraints": batch})["loss"].backward()
    grad = masked_lm.base_model.encoder.layer[-1].output.dense.weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_negative_gloss_weight_raises():
    with pytest.raises(ValueError, match="gloss_weight"):
        local_lexical(0.07, -0.1)


def test_sides_of_different_lengths_share_one_pass_with_the_states_of_separate_ones():
    masked_lm, batch = tiny_masked_lm(), constraint_batch()
    ids, attention, word, gloss = side(4, [1, 2, 3, 1, 2], [0] * 5)  # words alone: at most 5 tokens
    batch |= {
        "input_ids2": ids[:, :6],
        "attention_mask2": attention[:, :6],
        "word_mask2": word[:, :6],
        "gloss_mask2": gloss[:, :6],
    }
    model = TrainingModule(masked_lm, {"lexical": local_lexical(0.1, 0.0)}, {"lexical": 1.0})
    with torch.no_grad():
        got = model({"constraints": batch})["lexical"]
        expected = info_nce(
            hand_pooled(masked_lm, batch["input_ids1"], batch["attention_mask1"], batch["word_mask1"], -1),
            hand_pooled(masked_lm, batch["input_ids2"], batch["attention_mask2"], batch["word_mask2"], -1),
            SYNSETS,
            0.1,
        )
    assert got.item() == pytest.approx(expected.item(), rel=1e-5)
