"""distalign.eval.encoders: all-layer word/sentence vectors vs. a per-item forward pass; the on-disk cache."""

import random

import pytest
import torch

import distalign.eval.encoders as encoders
from distalign.config import TinyModelConfig
from distalign.data.tokenize import encode_words
from distalign.eval.encoders import (
    EncodingCache,
    cached,
    encode_sentences_all_layers,
    encode_words_all_layers,
    model_identity,
    sentence_vectors,
    word_vectors,
)
from distalign.models.encoder import Encoder
from distalign.models.loading import build_tiny_model, load_masked_lm, load_tokenizer

TINY = TinyModelConfig(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
WORDS = ["dog", "cat", "house", "tree", "river", "stone", "bird", "sun", "moon", "water", "fire", "road"]


def generated_sentences(n=200, seed=0):
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(3, 8))) for _ in range(n)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = build_tiny_model(tmp_path_factory.mktemp("tiny") / "model", generated_sentences(), TINY)
    model = Encoder(load_masked_lm(str(path)), -1).eval()  # a new nn.Module starts in train mode
    return model, load_tokenizer(str(path))


def reference(model, tokenizer, text):
    """[L+1, d]: one text alone, no padding; mean of its non-special token states at each layer."""
    enc = tokenizer(text, return_special_tokens_mask=True, return_tensors="pt")
    with torch.no_grad():
        states = model.masked_lm.base_model(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True
        ).hidden_states
    keep = enc["special_tokens_mask"][0] == 0
    return torch.stack([h[0, keep].mean(0) for h in states])


def test_words_all_layers_match_single_word_forward(tiny):
    model, tokenizer = tiny
    words = WORDS[:7] + ["dogcat", "x"]
    out = encode_words_all_layers(model, tokenizer, words, max_tokens=16, batch_size=4)
    assert out.shape == (TINY.num_layers + 1, len(words), TINY.hidden_size) and out.dtype == torch.float32
    for i, word in enumerate(words):
        torch.testing.assert_close(out[:, i], reference(model, tokenizer, word), atol=1e-5, rtol=1e-4)
    # same as the pooling the training objectives use (TrainingModule.encode_words at the word layer)
    enc = {k: torch.from_numpy(v) for k, v in encode_words(tokenizer, words, 16).items()}
    with torch.no_grad():
        trained_view = model.encode_words(enc["input_ids"], enc["attention_mask"], enc["word_mask"])
    torch.testing.assert_close(encode_words_all_layers(model, tokenizer, words)[-1], trained_view, atol=1e-5, rtol=1e-4)


def test_sentences_all_layers_match_single_sentence_forward_and_keep_order(tiny):
    model, tokenizer = tiny
    sentences = generated_sentences(9, seed=1) + ["dog"]
    out = encode_sentences_all_layers(model, tokenizer, sentences, max_length=128, batch_size=3)
    assert out.shape == (TINY.num_layers + 1, len(sentences), TINY.hidden_size)
    for i, sentence in enumerate(sentences):
        torch.testing.assert_close(out[:, i], reference(model, tokenizer, sentence), atol=1e-5, rtol=1e-4)


def test_encoding_is_deterministic_and_restores_train_mode(tiny):
    model, tokenizer = tiny
    model.train()
    try:
        a = encode_words_all_layers(model, tokenizer, WORDS)
        b = encode_words_all_layers(model, tokenizer, WORDS)
        assert model.training
        assert torch.equal(a, b)  # dropout off while encoding
    finally:
        model.eval()
    with pytest.raises(ValueError, match="empty"):
        encode_words_all_layers(model, tokenizer, [])


def test_cached_calls_fn_once_per_key(tmp_path):
    calls = []

    def fn():
        calls.append(1)
        return torch.arange(6.0).reshape(2, 3)

    first = cached(tmp_path, ["m", "words", "en", "h1", 16], fn)
    again = cached(tmp_path, ["m", "words", "en", "h1", 16], fn)
    assert torch.equal(first, again) and len(calls) == 1
    cached(tmp_path, ["m", "words", "de", "h1", 16], fn)
    assert len(calls) == 2 and len(list(tmp_path.glob("*.pt"))) == 2
    assert not list(tmp_path.glob("*.tmp"))
    cached(None, ["m"], fn)
    assert len(calls) == 3


def test_cache_hit_skips_the_model_and_weight_change_invalidates(tiny, tmp_path, monkeypatch):
    model, tokenizer = tiny
    calls = []
    real = encoders.encode_words_all_layers

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(encoders, "encode_words_all_layers", counting)
    cache = EncodingCache.for_model(tmp_path, model, tokenizer)
    first = word_vectors(model, tokenizer, WORDS, "en", cache)
    assert len(calls) == 1

    def boom(*args, **kwargs):
        raise AssertionError("model called on a cache hit")

    monkeypatch.setattr(model.masked_lm.base_model, "forward", boom)
    second = word_vectors(model, tokenizer, WORDS, "en", EncodingCache.for_model(tmp_path, model, tokenizer))
    assert torch.equal(first, second) and len(calls) == 1
    monkeypatch.undo()

    monkeypatch.setattr(encoders, "encode_words_all_layers", counting)
    before = model_identity(model, tokenizer)
    param = next(model.masked_lm.base_model.parameters())
    saved = param.detach().clone()
    with torch.no_grad():
        param.view(-1)[0] += 0.5
    try:
        assert model_identity(model, tokenizer) != before
        changed = word_vectors(model, tokenizer, WORDS, "en", EncodingCache.for_model(tmp_path, model, tokenizer))
        assert len(calls) == 2
        assert not torch.equal(changed, first)
    finally:
        with torch.no_grad():
            param.copy_(saved)
    assert model_identity(model, tokenizer) == before


def test_sentence_cache_keys_on_texts(tiny, tmp_path):
    model, tokenizer = tiny
    cache = EncodingCache.for_model(tmp_path, model, tokenizer)
    a = sentence_vectors(model, tokenizer, ["dog cat", "sun moon"], "eng", cache)
    b = sentence_vectors(model, tokenizer, ["dog cat", "sun moon road"], "eng", cache)
    assert len(list(tmp_path.glob("*.pt"))) == 2
    torch.testing.assert_close(a[:, 0], b[:, 0], atol=1e-5, rtol=1e-4)
    assert not torch.allclose(a[:, 1], b[:, 1])
