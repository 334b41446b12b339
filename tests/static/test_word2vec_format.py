"""word2vec text format: round trip, gensim reads what we write, malformed lines counted with file:line."""

import numpy as np
import pytest

from distalign.errors import InputError
from distalign.static.word2vec_format import read_word2vec, write_word2vec


def _vectors(n=6, dim=5, seed=0):
    rng = np.random.default_rng(seed)
    return [f"w{i}" for i in range(n)] + ["café"], rng.normal(size=(n + 1, dim)).astype(np.float32)


def test_round_trip_is_exact_for_float32(tmp_path):
    words, vectors = _vectors()
    path = write_word2vec(tmp_path / "v.vec", words, vectors)
    got_words, got, report = read_word2vec(path)
    assert got_words == words
    assert got.dtype == np.float32 and np.array_equal(got, vectors)
    assert (report.rows, report.malformed, report.duplicates) == (7, 0, 0)
    assert path.read_text(encoding="utf-8").splitlines()[0] == "7 5"


def test_gensim_loads_the_written_file(tmp_path):
    from gensim.models import KeyedVectors  # a test dependency only: `make gpu-check` collects this file without it

    words, vectors = _vectors(n=10, dim=4, seed=1)
    path = write_word2vec(tmp_path / "v.txt", words, vectors)
    kv = KeyedVectors.load_word2vec_format(str(path), binary=False)
    assert list(kv.index_to_key) == words
    for word, row in zip(words, vectors):
        np.testing.assert_array_equal(kv[word], row)


def test_malformed_and_duplicate_lines_are_counted_with_file_and_line(tmp_path):
    path = tmp_path / "bad.vec"
    path.write_text(
        "5 3\n"
        "a 1 2 3\n"
        "b 1 2\n"  # line 3: too few values
        "c 1 x 3\n"  # line 4: not a float
        "a 9 9 9\n"  # line 5: duplicate, first kept
        "d 1 nan 3\n"  # line 6: not finite
        "e 4 5 6 \n",  # trailing space is tolerated
        encoding="utf-8",
    )
    words, vectors, report = read_word2vec(path)
    assert words == ["a", "e"]
    np.testing.assert_array_equal(vectors, [[1, 2, 3], [4, 5, 6]])
    assert (report.rows, report.malformed, report.duplicates) == (2, 3, 1)
    assert report.examples == [
        f"{path}:3: expected 3 values after the word, got 2",
        f"{path}:4: a value of 'c' is not a float",
        f"{path}:5: duplicate word 'a' (first vector kept)",
        f"{path}:6: a value of 'd' is not finite",
    ]
    assert "3 malformed rows skipped, 1 duplicate words skipped" in report.summary()


def test_max_words_keeps_the_first_rows(tmp_path):
    words, vectors = _vectors()
    got_words, got, _ = read_word2vec(write_word2vec(tmp_path / "v.vec", words, vectors), max_words=3)
    assert got_words == words[:3] and np.array_equal(got, vectors[:3])


def test_bad_header_and_missing_file_raise(tmp_path):
    path = tmp_path / "noheader.vec"
    path.write_text("a 1 2 3\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"noheader.vec:1: expected a word2vec header"):
        read_word2vec(path)
    with pytest.raises(InputError, match="file not found"):
        read_word2vec(tmp_path / "absent.vec")


@pytest.mark.parametrize(
    "words, shape, match",
    [
        (["a b", "c"], (2, 3), "no whitespace"),
        (["a", "a"], (2, 3), "duplicates"),
        (["a"], (2, 3), "1 entries but vectors has 2 rows"),
        (["a"], (3,), "2-D"),
    ],
)
def test_write_rejects_bad_input(tmp_path, words, shape, match):
    with pytest.raises(ValueError, match=match):
        write_word2vec(tmp_path / "v.vec", words, np.zeros(shape))
