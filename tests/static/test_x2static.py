"""X2Static: the negative-sampling loss, vocabulary, subsampling, teacher context vectors, training."""

import random

import numpy as np
import pytest
import torch

from distalign.config import TinyModelConfig
from distalign.models.loading import build_tiny_model
from distalign.static.word2vec_format import read_word2vec
from distalign.static.x2static import (
    build_word_vocab,
    context_vectors,
    effective_subsample_threshold,
    extract_static_vectors,
    extract_to_file,
    keep_probabilities,
    load_teacher,
    negative_distribution,
    negative_sampling_loss,
    sample_negatives,
)


def _corpus(seed=0, rounds=12):
    """'cat' and 'dog' occur in exactly the same sentences; 'zebra' in sentences of other words."""
    rng = random.Random(seed)
    pool_a = "red green blue small big old new fast slow happy".split()
    pool_b = "river mountain cloud stone forest ocean sky field road bridge".split()
    sentences = []
    for _ in range(rounds):
        ctx = rng.sample(pool_a, 4)
        sentences += [" ".join(ctx[:2] + [w] + ctx[2:]) for w in ("cat", "dog")]
        ctx = rng.sample(pool_b, 4)
        sentences.append(" ".join(ctx[:2] + ["zebra"] + ctx[2:]))
    return sentences


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny tensors gain nothing from threads, and on a busy 2-core machine thread hand-offs cost ~10x."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    cfg = TinyModelConfig(vocab_size=60, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_length=32)
    return str(build_tiny_model(tmp_path_factory.mktemp("x2s") / "model", _corpus(), cfg))


# ---------------------------------------------------------------------------- loss
def _log_sigmoid(x):
    return -np.log1p(np.exp(-x))


def test_loss_hand_computed():
    # σ(ln 3) = 3/4 for the positive; the negative is orthogonal to c: σ(0) = 1/2.
    loss = negative_sampling_loss(
        torch.tensor([[1.0, 0.0]]), torch.tensor([[float(np.log(3.0)), 0.0]]), torch.tensor([[[0.0, 1.0]]])
    )
    assert loss.item() == pytest.approx(np.log(4 / 3) + np.log(2), rel=1e-6)


def test_loss_against_numpy_loop():
    rng = np.random.default_rng(0)
    u, c, neg = rng.normal(size=(3, 5)), rng.normal(size=(3, 5)), rng.normal(size=(3, 4, 5))
    expected = np.mean(
        [-_log_sigmoid(u[b] @ c[b]) - sum(_log_sigmoid(-neg[b, k] @ c[b]) for k in range(4)) for b in range(3)]
    )
    got = negative_sampling_loss(*(torch.tensor(a) for a in (u, c, neg)))
    assert got.item() == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize(
    "shapes, match",
    [
        (((2, 3), (2, 4), (2, 5, 3)), "static_target and context"),
        (((2, 3), (2, 3), (2, 5, 4)), "static_negatives"),
        (((2, 3), (2, 3), (3, 5, 3)), "static_negatives"),
    ],
)
def test_loss_rejects_bad_shapes(shapes, match):
    with pytest.raises(ValueError, match=match):
        negative_sampling_loss(*(torch.zeros(s) for s in shapes))


# ---------------------------------------------------------------------------- vocabulary, subsampling
def test_build_word_vocab_orders_by_count_then_word():
    vocab = build_word_vocab(["b a c a", "c a d"], min_count=1)
    assert vocab.words == ["a", "c", "b", "d"] and vocab.counts.tolist() == [3, 2, 1, 1]
    assert build_word_vocab(["b a c a", "c a d"], min_count=2).words == ["a", "c"]
    assert build_word_vocab(["b a c a", "c a d"], max_words=3).words == ["a", "c", "b"]
    with pytest.raises(ValueError, match="min_count"):
        build_word_vocab(["a"], min_count=0)


def test_keep_probabilities_hand_computed():
    # f = [0.9, 0.1], t = 0.01: t/f = [1/90, 1/10]; keep = sqrt(t/f) + t/f.
    got = keep_probabilities(np.array([90, 10]), 0.01)
    np.testing.assert_allclose(got, [np.sqrt(1 / 90) + 1 / 90, np.sqrt(0.1) + 0.1])
    assert keep_probabilities(np.array([1, 1]), 0.5).tolist() == [1.0, 1.0]  # capped at 1


def test_effective_threshold_is_the_default_for_large_vocabularies():
    assert effective_subsample_threshold(1e-5, 100_000) == pytest.approx(1e-5)
    assert effective_subsample_threshold(1e-5, 50) == pytest.approx(0.02)
    assert effective_subsample_threshold(1e-3, 50_000) == 1e-3
    with pytest.raises(ValueError, match="threshold"):
        effective_subsample_threshold(0.0, 10)


def test_negative_distribution_is_square_root_of_counts():
    np.testing.assert_allclose(negative_distribution(np.array([4, 1, 0])), [2 / 3, 1 / 3, 0])


def test_negatives_avoid_the_target_and_follow_the_distribution():
    probabilities = torch.tensor([0.5, 0.3, 0.2])
    targets = torch.zeros(4000, dtype=torch.long)
    negatives = sample_negatives(probabilities, targets, 5, torch.Generator().manual_seed(0))
    assert negatives.shape == (4000, 5) and not (negatives == 0).any()
    # Without word 0 the draws follow 0.3 : 0.2 -> 0.6 of them are word 1 (std of the share ~0.003).
    assert (negatives == 1).double().mean().item() == pytest.approx(0.6, abs=0.015)


# ---------------------------------------------------------------------------- teacher context vectors
def _naive_context(model, tokenizer, sentence, position, layer):
    """One sentence at a time, no padding: mask the target's subwords, average the other word tokens."""
    enc = tokenizer(sentence.split(), is_split_into_words=True, return_tensors="pt")
    ids = enc["input_ids"].clone()
    word_ids = enc.word_ids(0)
    for t, w in enumerate(word_ids):
        if w == position:
            ids[0, t] = tokenizer.mask_token_id
    with torch.no_grad():
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states[layer][0]
    rows = [hidden[t] for t, w in enumerate(word_ids) if w is not None and w != position]
    return torch.stack(rows).mean(0)


def test_context_vectors_match_a_per_sentence_loop(tiny_model):
    model, tokenizer, layer = load_teacher(tiny_model, -1)
    assert layer == 2
    sentences = ["red cat big", "river mountain zebra cloud stone forest", "old dog"]
    positions = [1, 2, 0]
    got, valid = context_vectors(model, tokenizer, sentences, positions, layer)
    assert valid.tolist() == [True, True, True]
    for row, (sentence, position) in enumerate(zip(sentences, positions)):
        torch.testing.assert_close(
            got[row], _naive_context(model, tokenizer, sentence, position, layer), rtol=1e-4, atol=1e-5
        )


def test_context_does_not_depend_on_the_masked_target(tiny_model):
    model, tokenizer, layer = load_teacher(tiny_model, 1)
    # A partner with as many subwords as 'cat', so both sentences get the same number of mask tokens.
    partner = next(w for w in ("dog", "red", "old", "new", "sky") if len(tokenizer.tokenize(w)) == 3)
    assert len(tokenizer.tokenize("cat")) == 3
    got, _ = context_vectors(
        model, tokenizer, ["big cat slow", f"big {partner} slow", "big slow cat"], [1, 1, 2], layer
    )
    torch.testing.assert_close(got[0], got[1])
    assert not torch.allclose(got[0], got[2])  # word order still matters


def test_truncated_target_is_invalid(tiny_model):
    model, tokenizer, layer = load_teacher(tiny_model, 1)
    _, valid = context_vectors(model, tokenizer, ["red cat big old new fast slow"], [6], layer, max_length=4)
    assert valid.tolist() == [False]


def test_layer_out_of_range_is_rejected(tiny_model):
    with pytest.raises(ValueError, match=r"layer 3 is outside \[-3, 2\]"):
        load_teacher(tiny_model, 3)


# ---------------------------------------------------------------------------- training
def _cos(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def test_words_in_identical_contexts_get_similar_vectors(tiny_model):
    logged = []
    words, vectors = extract_static_vectors(
        tiny_model, _corpus(), layer=-1, epochs=20, lr=2e-2, batch_size=32, seed=0, log_every=20, progress=logged.append
    )
    assert vectors.shape == (len(words), 32) and "cat" in words
    cat, dog, zebra = (vectors[words.index(w)] for w in ("cat", "dog", "zebra"))
    assert _cos(cat, dog) > 0.9
    assert _cos(cat, dog) > _cos(cat, zebra) + 0.25 and _cos(cat, dog) > _cos(dog, zebra) + 0.25
    assert logged and logged[-1]["loss"] < logged[0]["loss"] and logged[0]["words_per_s"] > 0


def test_extract_to_file_end_to_end(tiny_model, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(_corpus(rounds=2)) + "\n\n", encoding="utf-8")
    result = extract_to_file(tiny_model, [corpus], tmp_path / "out" / "static.vec", layer=1, epochs=1, progress=None)
    words, vectors, report = read_word2vec(result["path"])
    assert result["sentences"] == 6 and result["words"] == len(words) == report.rows
    assert set(words) == {w for s in _corpus(rounds=2) for w in s.split()}
    assert vectors.shape == (len(words), 32) and np.isfinite(vectors).all()
    with pytest.raises(ValueError, match="corpus_paths is empty"):
        extract_to_file(tiny_model, [], tmp_path / "x.vec")


def test_cached_contexts_train_like_recomputed_ones(tiny_model):
    options = dict(layer=1, epochs=2, lr=2e-2, batch_size=16, seed=3, progress=None)
    words, cached = extract_static_vectors(tiny_model, _corpus(rounds=2), **options)
    same_words, recomputed = extract_static_vectors(tiny_model, _corpus(rounds=2), cache_bytes=0, **options)
    assert words == same_words
    np.testing.assert_allclose(cached, recomputed, atol=1e-4)
    assert not np.allclose(
        cached, extract_static_vectors(tiny_model, _corpus(rounds=2), **{**options, "seed": 4})[1], atol=1e-4
    )
