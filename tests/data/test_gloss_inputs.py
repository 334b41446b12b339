"""Sense-level inputs ``[CLS] word [SEP] gloss [SEP]``: layout, masks, fallbacks, the Ray Data batch function."""

import numpy as np
import pytest
from tiny_tokenizers import wordpiece_tokenizer

from distalign.config import TinyModelConfig
from distalign.data.gloss_inputs import encode_words_with_gloss
from distalign.data.tokenize import encode_words
from distalign.models.loading import build_tiny_model, load_tokenizer

TEXTS = [
    "the cat sat on the mat",
    "a small domesticated carnivorous mammal",
    "der hund bellt laut",
    "a member of the genus canis",
    "le chat dort sur le canape",
    "un petit mammifere carnivore",
    "extraordinarily long unpronounceable words",
    "die katze schlaeft auf dem sofa",
] * 4
WORDS = ["cat", "hund", "chat", "katze"]
GLOSSES = [
    "a small domesticated carnivorous mammal",
    "a member of the genus canis",
    "un petit mammifere carnivore",
    "die katze schlaeft",
]


@pytest.fixture(scope="module")
def xlmr_tokenizer_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "tiny"
    return build_tiny_model(
        out,
        TEXTS,
        TinyModelConfig(vocab_size=80, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=16, max_length=40),
    )


@pytest.fixture(scope="module")
def bert_tokenizer():
    return wordpiece_tokenizer(TEXTS, vocab_size=90)


@pytest.fixture(params=["xlmr", "bert"])
def tokenizer_and_separator(request, xlmr_tokenizer_dir, bert_tokenizer):
    """The tokenizer and the special tokens its pair layout puts between word and gloss."""
    if request.param == "xlmr":
        tokenizer = load_tokenizer(str(xlmr_tokenizer_dir))
        return tokenizer, [tokenizer.sep_token_id, tokenizer.sep_token_id]  # <s> w </s></s> g </s>
    return bert_tokenizer, [bert_tokenizer.sep_token_id]  # [CLS] w [SEP] g [SEP]


def pieces(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def decoded(tokenizer, ids, mask):
    return tokenizer.decode(ids[mask.astype(bool)].tolist()).strip()


def test_layout_and_masks_decode_back(tokenizer_and_separator):
    tokenizer, separator = tokenizer_and_separator
    max_tokens = 40
    enc = encode_words_with_gloss(tokenizer, WORDS, GLOSSES, max_tokens)
    assert set(enc) == {"input_ids", "attention_mask", "word_mask", "gloss_mask"}
    assert all(v.shape == (len(WORDS), max_tokens) and v.dtype == np.int64 for v in enc.values())
    assert max(len(pieces(tokenizer, w)) for w in WORDS) > 1, "test words should span several subwords"
    for row, (word, gloss) in enumerate(zip(WORDS, GLOSSES)):
        # independent layout: the pieces of each text, framed by the model's specials by hand
        w, g = pieces(tokenizer, word), pieces(tokenizer, gloss)
        expected = [tokenizer.cls_token_id] + w + separator + g + [tokenizer.sep_token_id]
        n = len(expected)
        assert enc["input_ids"][row, :n].tolist() == expected
        assert (enc["input_ids"][row, n:] == tokenizer.pad_token_id).all()
        assert enc["attention_mask"][row].tolist() == [1] * n + [0] * (max_tokens - n)
        assert enc["word_mask"][row].tolist() == [0] + [1] * len(w) + [0] * (max_tokens - 1 - len(w))
        gloss_start = 1 + len(w) + len(separator)
        assert enc["gloss_mask"][row].tolist() == (
            [0] * gloss_start + [1] * len(g) + [0] * (max_tokens - gloss_start - len(g))
        )
        # decoding the marked tokens gives the texts back (the BERT tokenizer is uncased)
        assert decoded(tokenizer, enc["input_ids"][row], enc["word_mask"][row]) == word.lower()
        assert decoded(tokenizer, enc["input_ids"][row], enc["gloss_mask"][row]) == gloss.lower()


def test_only_the_gloss_is_truncated(tokenizer_and_separator):
    tokenizer, separator = tokenizer_and_separator
    word, gloss = "katze", "a small domesticated carnivorous mammal of the genus canis"
    w, g = pieces(tokenizer, word), pieces(tokenizer, gloss)
    max_tokens = 1 + len(w) + len(separator) + 3 + 1  # room for exactly 3 gloss subwords
    enc = encode_words_with_gloss(tokenizer, [word], [gloss], max_tokens)
    assert enc["attention_mask"].sum() == max_tokens
    assert enc["input_ids"][0, -1] == tokenizer.sep_token_id
    assert decoded(tokenizer, enc["input_ids"][0], enc["word_mask"][0]) == word
    assert enc["input_ids"][0][enc["gloss_mask"][0] == 1].tolist() == g[:3]


def test_missing_gloss_or_too_long_word_falls_back_to_the_word_alone(tokenizer_and_separator):
    tokenizer, separator = tokenizer_and_separator
    long_word = "extraordinarily"
    max_tokens = 1 + len(separator) + 1 + len(pieces(tokenizer, long_word))  # one token short of a gloss subword
    words = ["cat", "hund", "chat", long_word, "katze"]
    glosses = [None, "", "   ", "a small mammal", "a small mammal"]
    enc = encode_words_with_gloss(tokenizer, words, glosses, max_tokens)
    alone = encode_words(tokenizer, words[:4], max_tokens)
    for key in ("input_ids", "attention_mask", "word_mask"):
        assert np.array_equal(enc[key][:4], alone[key]), key
    assert (enc["gloss_mask"][:4] == 0).all()
    assert decoded(tokenizer, enc["input_ids"][3], enc["word_mask"][3]) == long_word
    # the last row still gets its gloss
    assert enc["gloss_mask"][4].sum() > 0 and decoded(tokenizer, enc["input_ids"][4], enc["word_mask"][4]) == "katze"


def test_bad_arguments_raise(xlmr_tokenizer_dir):
    tokenizer = load_tokenizer(str(xlmr_tokenizer_dir))
    with pytest.raises(ValueError, match="equal lengths"):
        encode_words_with_gloss(tokenizer, ["cat", "chat"], ["gloss"], 16)
    with pytest.raises(ValueError, match="max_tokens=5"):
        encode_words_with_gloss(tokenizer, ["cat"], ["gloss"], 5)  # XLM-R's pair layout takes 4 specials


def test_sense_level_constraint_stream_rows(xlmr_tokenizer_dir):
    from distalign.data.stream_plugins import STREAMS, WordPairTokens

    tokenizer = load_tokenizer(str(xlmr_tokenizer_dir))
    batch = {
        "word1": np.array(["cat", "hund", "chat"], dtype=object),
        "gloss1": np.array([GLOSSES[0], None, GLOSSES[2]], dtype=object),
        "word2": np.array(["katze", "chat", "cat"], dtype=object),
        "gloss2": np.array([GLOSSES[3], GLOSSES[2], None], dtype=object),
        "synset_index": np.array([4, 9, 4], dtype=np.int32),
        "row": np.array([0, 1, 2]),
    }
    out = STREAMS["constraints"].tokenize(batch, tokenizer, WordPairTokens(max_tokens=24, with_gloss=True))
    expected_keys = {f"{k}{s}" for k in ("input_ids", "attention_mask", "word_mask", "gloss_mask") for s in "12"}
    assert set(out) == expected_keys | {"synset", "row"}
    assert out["synset"].dtype == np.int64 and out["synset"].tolist() == [4, 9, 4]
    for side in "12":
        direct = encode_words_with_gloss(tokenizer, batch[f"word{side}"].tolist(), batch[f"gloss{side}"].tolist(), 24)
        for key, value in direct.items():
            assert np.array_equal(out[f"{key}{side}"], value)
    assert out["gloss_mask1"].sum(1).astype(bool).tolist() == [True, False, True]
    assert out["gloss_mask2"].sum(1).astype(bool).tolist() == [True, True, False]
