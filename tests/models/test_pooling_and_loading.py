"""Word pooling, the offline tiny model, loading local HF directories (XLM-R-style and BERT-style)."""

import json

import numpy as np
import pytest
import torch
from tiny_tokenizers import wordpiece_tokenizer
from transformers import (
    AutoModelForMaskedLM,
    AutoTokenizer,
    BertConfig,
    BertForMaskedLM,
)

from distalign.config import SyntheticConfig, TinyModelConfig
from distalign.data.synthetic import generate_world
from distalign.data.tokenize import encode_words
from distalign.models.encoder import Encoder
from distalign.models.loading import build_tiny_model, load_masked_lm, load_tokenizer
from distalign.models.pooling import mean_pool


# ------------------------------------------------------------------------------ mean_pool
def test_mean_pool_hand_computed():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3)
    mask = torch.tensor([[0, 1, 1, 0], [0, 0, 0, 0]])
    out = mean_pool(hidden, mask)
    # row 0: mean of positions 1 and 2 = ([3,4,5] + [6,7,8]) / 2
    assert torch.allclose(out[0], torch.tensor([4.5, 5.5, 6.5]))
    # row 1: no word token -> zeros
    assert torch.equal(out[1], torch.zeros(3))
    assert out.shape == (2, 3)


def test_mean_pool_random_against_loop():
    g = torch.Generator().manual_seed(0)
    hidden = torch.randn(5, 7, 4, generator=g)
    mask = (torch.rand(5, 7, generator=g) < 0.5).long()
    mask[0] = 0
    out = mean_pool(hidden, mask)
    for b in range(5):
        pos = mask[b].nonzero().flatten().tolist()
        expected = hidden[b, pos].mean(0) if pos else torch.zeros(4)
        assert torch.allclose(out[b], expected, atol=1e-6)


def test_mean_pool_keeps_dtype():
    hidden = torch.ones(1, 3, 2, dtype=torch.bfloat16)
    out = mean_pool(hidden, torch.tensor([[1, 1, 0]]))
    assert out.dtype == torch.bfloat16 and torch.equal(out, torch.ones(1, 2, dtype=torch.bfloat16))


# ------------------------------------------------------------------------------ tiny model
TINY = TinyModelConfig(vocab_size=300, hidden_size=32, num_layers=3, num_heads=2, intermediate_size=48, max_length=32)


@pytest.fixture(scope="module")
def synthetic_texts(tmp_path_factory):
    out = tmp_path_factory.mktemp("world")
    world = generate_world(SyntheticConfig(num_concepts=60, sentences_per_language=120), out, seed=0)
    return [line for path in world.corpora.values() for line in path.read_text().splitlines() if line]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory, synthetic_texts):
    out = tmp_path_factory.mktemp("models") / "tiny-model"
    assert len(synthetic_texts) >= 300
    result = build_tiny_model(out, synthetic_texts, TINY, seed=0)
    assert result == out
    return out


def test_tiny_model_directory_loads_with_auto_classes(tiny_dir):
    assert tiny_dir.is_dir()
    assert not tiny_dir.with_name(tiny_dir.name + ".tmp").exists()
    model = AutoModelForMaskedLM.from_pretrained(tiny_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    assert tokenizer.is_fast
    assert model.config.hidden_size == TINY.hidden_size
    assert model.config.num_hidden_layers == TINY.num_layers
    assert model.config.num_attention_heads == TINY.num_heads
    assert model.config.intermediate_size == TINY.intermediate_size
    assert model.config.vocab_size == len(tokenizer)
    assert len(tokenizer) <= TINY.vocab_size
    assert tokenizer.mask_token == "<mask>" and tokenizer.pad_token == "<pad>"
    assert model.config.pad_token_id == tokenizer.pad_token_id
    # special tokens frame a word; the tokenizer was trained on the text, so words are not all <unk>
    enc = tokenizer("lafikaur vebiur")
    assert enc["input_ids"][0] == tokenizer.cls_token_id and enc["input_ids"][-1] == tokenizer.sep_token_id
    assert tokenizer.unk_token_id not in enc["input_ids"]
    # a forward pass at max_length positions works (position embeddings are large enough)
    ids = torch.full((1, TINY.max_length), tokenizer.mask_token_id)
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, TINY.max_length, len(tokenizer))


def test_library_loaders_on_tiny_dir(tiny_dir):
    tokenizer = load_tokenizer(str(tiny_dir))
    assert tokenizer.is_fast
    model = load_masked_lm(str(tiny_dir))
    assert model.config.hidden_size == TINY.hidden_size


def expected_word_vectors(masked_lm, tokenizer, words, enc, layer):
    """Independent: the word's own subword ids (tokenised alone, no specials) sit right after [CLS]."""
    ids = torch.from_numpy(enc["input_ids"])
    with torch.no_grad():
        states = masked_lm.base_model(
            input_ids=ids, attention_mask=torch.from_numpy(enc["attention_mask"]), output_hidden_states=True
        ).hidden_states[layer]
    out = []
    for row, word in enumerate(words):
        pieces = tokenizer(word, add_special_tokens=False)["input_ids"]
        assert ids[row, 0].item() == tokenizer.cls_token_id
        assert ids[row, 1 : 1 + len(pieces)].tolist() == pieces
        assert ids[row, 1 + len(pieces)].item() == tokenizer.sep_token_id
        out.append(states[row, 1 : 1 + len(pieces)].mean(0))
    return torch.stack(out), [len(tokenizer(w, add_special_tokens=False)["input_ids"]) for w in words]


def check_encode_words(path, words, max_tokens=12):
    tokenizer = load_tokenizer(str(path))
    masked_lm = load_masked_lm(str(path)).eval()
    n_layers = masked_lm.config.num_hidden_layers
    enc = encode_words(tokenizer, words, max_tokens)
    assert enc["input_ids"].shape == (len(words), max_tokens)
    for layer in (-1, 0, 1):
        model = Encoder(masked_lm, layer).eval()
        with torch.no_grad():
            got = model.encode_words(*(torch.from_numpy(enc[k]) for k in ("input_ids", "attention_mask", "word_mask")))
        expected, lengths = expected_word_vectors(masked_lm, tokenizer, words, enc, layer)
        assert got.shape == (len(words), masked_lm.config.hidden_size)
        assert torch.allclose(got, expected, atol=1e-5), f"layer {layer}"
    # word_mask marks exactly the word's subwords
    assert enc["word_mask"].sum(1).tolist() == lengths
    assert max(lengths) > 1, "test words should include multi-subword words"
    # the explicit layer argument overrides word_layer; last layer is index n_layers
    model = Encoder(masked_lm, 0).eval()
    t = {k: torch.from_numpy(v) for k, v in enc.items()}
    with torch.no_grad():
        last = model.encode_words(t["input_ids"], t["attention_mask"], t["word_mask"], layer=n_layers)
    assert torch.allclose(last, expected_word_vectors(masked_lm, tokenizer, words, enc, -1)[0], atol=1e-5)
    # padding does not leak into the vector: a longer pad gives the same result
    enc_long = encode_words(tokenizer, words, max_tokens + 8)
    t_long = {k: torch.from_numpy(v) for k, v in enc_long.items()}
    with torch.no_grad():
        longer = model.encode_words(t_long["input_ids"], t_long["attention_mask"], t_long["word_mask"], layer=n_layers)
    assert torch.allclose(last, longer, atol=1e-5)
    return tokenizer


def test_alignment_model_encode_words_tiny(tiny_dir, synthetic_texts):
    words = synthetic_texts[0].split()[:3] + ["zzqxkw", "a"]
    check_encode_words(tiny_dir, words)


# ------------------------------------------------------------------------------ BERT-style local dir
@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory, synthetic_texts):
    out = tmp_path_factory.mktemp("models") / "bert-tiny-uncased"
    tokenizer = wordpiece_tokenizer(synthetic_texts, vocab_size=120)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=24,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id,
    )
    BertForMaskedLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def test_bert_style_directory_through_library_loaders(bert_dir, synthetic_texts):
    masked_lm = load_masked_lm(str(bert_dir))
    assert isinstance(masked_lm, BertForMaskedLM)
    assert json.loads((bert_dir / "config.json").read_text())["model_type"] == "bert"
    words = synthetic_texts[1].split()[:3] + ["Mixed", "q"]
    tokenizer = check_encode_words(bert_dir, words)
    assert tokenizer.cls_token == "[CLS]" and tokenizer.pad_token_id == 0
    # uncased: the normaliser lower-cases, as in bert-base-multilingual-uncased
    enc = encode_words(tokenizer, ["Mixed", "mixed"], 8)
    assert np.array_equal(enc["input_ids"][0], enc["input_ids"][1])
    # special tokens and padding are outside word_mask
    row = enc["input_ids"][0]
    special = np.isin(row, [tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    assert np.array_equal(enc["word_mask"][0], (~special).astype(np.int64))
