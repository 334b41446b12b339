"""The corpus's sentence encoding (the Rust tokenizer's batch encoding read into numpy) gives what the Hugging Face
call gives: ids, attention mask and word ids, truncated and padded alike, on a WordPiece and a Unigram tokenizer."""

import numpy as np
import pytest
from tiny_tokenizers import tokenizer_of_kind

from distalign.data.tokenize import encode_sentences, encode_words

SENTENCES = [
    "the cat sat on the mat",
    "der hund bellt laut",
    "a dog barked at the cat",
    "die katze schlaeft",
    "it rained",
    "es regnet heute nicht",
    "the end",
    "unseen wörds ünd çharacters 123",
]


@pytest.fixture(scope="module", params=["bert", "xlmr"])
def tokenizer(request, tmp_path_factory):
    return tokenizer_of_kind(request.param, SENTENCES * 3, tmp_path_factory.mktemp("models") / "tiny")


@pytest.mark.parametrize("max_length", [6, 16, 48])
def test_sentences_encode_as_the_hugging_face_call_does(tokenizer, max_length):
    texts = SENTENCES + [" ".join(["cat"] * 40), "  spaced\tout   words "]
    encode_words(tokenizer, ["cat"], 4)  # a Hugging Face call leaves its truncation on the shared backend
    got = encode_sentences(tokenizer, texts, max_length)
    expected = tokenizer(
        [t.split() for t in texts],
        is_split_into_words=True,
        max_length=max_length,
        truncation=True,
        padding="max_length",
        return_tensors="np",
    )
    np.testing.assert_array_equal(got["input_ids"], expected["input_ids"])
    np.testing.assert_array_equal(got["attention_mask"], expected["attention_mask"])
    words = [[-1 if w is None else w for w in expected.word_ids(row)] for row in range(len(texts))]
    np.testing.assert_array_equal(got["word_ids"], np.array(words))
    assert all(got[k].dtype == np.int64 for k in got)
