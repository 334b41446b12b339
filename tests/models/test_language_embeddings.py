"""Language embeddings at the input and the target-language-conditioned MLM head (DICT-MLM)."""

import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM, XLMRobertaConfig, XLMRobertaForMaskedLM

from distalign.models.language_embeddings import (
    LanguageConditionedLMHead,
    LanguageEmbeddings,
    position_ids,
    pretrained_lm_transform,
)

HIDDEN, VOCAB, PAD = 16, 50, 1
NUM_LANGUAGES = 3
TINY = dict(
    vocab_size=VOCAB,
    hidden_size=HIDDEN,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=40,
    pad_token_id=PAD,
)


def tiny_xlmr():
    torch.manual_seed(0)
    return XLMRobertaForMaskedLM(XLMRobertaConfig(**TINY)).eval()


def tiny_bert():
    torch.manual_seed(0)
    return BertForMaskedLM(BertConfig(**TINY)).eval()


def padded_batch(left: bool):
    """Two sentences of lengths 6 and 4, padded to 6 on the right or on the left."""
    ids = torch.tensor([[0, 11, 12, 13, 14, 2], [0, 21, 22, 2, PAD, PAD]])
    mask = (ids != PAD).long()
    if left:
        ids[1], mask[1] = ids[1].roll(2), mask[1].roll(2)
    return ids, mask


# ------------------------------------------------------------------------------ input language embeddings
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("build", [tiny_xlmr, tiny_bert])
def test_zero_init_language_embeddings_give_the_plain_model(build, left):
    model = build()
    ids, mask = padded_batch(left)
    languages = LanguageEmbeddings(NUM_LANGUAGES, HIDDEN)
    assert torch.equal(languages.embedding.weight, torch.zeros(NUM_LANGUAGES, HIDDEN))
    plain = model(input_ids=ids, attention_mask=mask).logits
    for lang_ids in (torch.tensor([0, 2]), torch.tensor([[0, 1, 2, 0, 1, 2], [2, 2, 2, 1, 1, 1]])):
        embeds = languages(model, ids, lang_ids)
        with_languages = model(inputs_embeds=embeds, position_ids=position_ids(model, ids), attention_mask=mask).logits
        torch.testing.assert_close(with_languages, plain, rtol=0, atol=1e-6)


def test_position_ids_matter_for_xlmr_with_left_padding():
    """Why position_ids is passed: from inputs_embeds alone XLM-R numbers pads as real positions."""
    model = tiny_xlmr()
    ids, mask = padded_batch(left=True)
    assert position_ids(model, ids)[1].tolist() == [PAD, PAD, PAD + 1, PAD + 2, PAD + 3, PAD + 4]
    embeds = model.get_input_embeddings()(ids)
    plain = model(input_ids=ids, attention_mask=mask).logits
    unnumbered = model(inputs_embeds=embeds, attention_mask=mask).logits
    assert not torch.allclose(unnumbered[1, 2:], plain[1, 2:], atol=1e-4)
    assert position_ids(tiny_bert(), ids) is None  # BERT numbers positions 0..T-1 either way


def test_language_vectors_are_added_to_the_word_embeddings():
    model = tiny_xlmr()
    ids, _ = padded_batch(left=False)
    languages = LanguageEmbeddings(NUM_LANGUAGES, HIDDEN)
    torch.nn.init.normal_(languages.embedding.weight)
    lang_ids = torch.tensor([2, 1])
    embeds = languages(model, ids, lang_ids)
    word = model.roberta.embeddings.word_embeddings.weight
    for row in range(2):
        for pos in range(ids.shape[1]):
            expected = word[ids[row, pos]] + languages.embedding.weight[lang_ids[row]]
            torch.testing.assert_close(embeds[row, pos], expected)


# ------------------------------------------------------------------------------ conditioned head
def hand_head(head, states, lang_ids, decoder):
    """LN(gelu(W [h ; e] + b)) · E^T + bias, written out with raw weights."""
    x = torch.cat([states, head.target_language.weight[lang_ids]], -1) @ head.dense.weight.T + head.dense.bias
    x = 0.5 * x * (1 + torch.erf(x / 2**0.5))
    x = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + head.layer_norm.eps)
    x = x * head.layer_norm.weight + head.layer_norm.bias
    return x @ decoder.weight.T + decoder.bias


def test_head_shape_formula_and_language_conditioning():
    torch.manual_seed(1)
    head = LanguageConditionedLMHead(HIDDEN, NUM_LANGUAGES, lang_dim=4)
    decoder = torch.nn.Linear(HIDDEN, VOCAB)
    states = torch.randn(5, HIDDEN)
    lang_ids = torch.tensor([0, 1, 2, 1, 0])
    logits = head(states, lang_ids, decoder)
    assert logits.shape == (5, VOCAB)
    torch.testing.assert_close(logits, hand_head(head, states, lang_ids, decoder))
    other = head(states, (lang_ids + 1) % NUM_LANGUAGES, decoder)
    assert not torch.allclose(logits, other, atol=1e-3)  # the target language changes the prediction
    # also with extra leading dimensions ([B, T, d])
    assert head(states.view(1, 5, HIDDEN), lang_ids.view(1, 5), decoder).shape == (1, 5, VOCAB)


@pytest.mark.parametrize("build", [tiny_xlmr, tiny_bert])
def test_pretrained_transform_starts_as_the_models_own_head_then_learns_languages(build):
    model = build()
    head = LanguageConditionedLMHead(HIDDEN, NUM_LANGUAGES, layer_norm_eps=model.config.layer_norm_eps)
    head.load_pretrained_transform(*pretrained_lm_transform(model))
    states = torch.randn(6, HIDDEN, generator=torch.Generator().manual_seed(2))
    lang_ids = torch.tensor([0, 1, 2, 0, 1, 2])
    decoder = model.get_output_embeddings()
    own_head = model.lm_head if hasattr(model, "lm_head") else model.cls
    with torch.no_grad():
        expected = own_head(states)
        for target in range(NUM_LANGUAGES):  # every target language: exactly the pretrained head
            torch.testing.assert_close(head(states, torch.full((6,), target), decoder), expected)

    # One SGD step: the language columns get a gradient (no zero-times-zero saddle), so logits
    # start to depend on the target language.
    optimizer = torch.optim.SGD(head.parameters(), lr=1.0)
    F.cross_entropy(head(states, lang_ids, decoder), torch.tensor([3, 4, 5, 6, 7, 8])).backward()
    assert head.dense.weight.grad[:, HIDDEN:].abs().sum() > 0
    optimizer.step()
    with torch.no_grad():
        a = head(states, torch.zeros(6, dtype=torch.long), decoder)
        b = head(states, torch.ones(6, dtype=torch.long), decoder)
    assert not torch.allclose(a, b, atol=1e-4)


def test_bad_models_and_shapes_raise_value_errors():
    with pytest.raises(ValueError, match="masked_lm"):
        pretrained_lm_transform(torch.nn.Linear(2, 2))
    head = LanguageConditionedLMHead(HIDDEN, NUM_LANGUAGES)
    with pytest.raises(ValueError, match="dense"):
        head.load_pretrained_transform(torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
