"""distalign.eval.benchmarks: readers on hand-made files with malformed rows, and on slices of ../shared/data."""

from pathlib import Path

import pytest

from distalign.errors import InputError
from distalign.eval.benchmarks import (
    gbli_test_path,
    multisimlex_path,
    read_bli_dictionary,
    read_multisimlex,
    read_tatoeba,
    read_vocabulary,
    tatoeba_paths,
    vocab_path,
)

EVAL_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "eval"


def lines_of(report):
    return [int(e.split(": ")[0].rsplit(":", 1)[1]) for e in report.examples]


# ------------------------------------------------------------------------------ BLI dictionaries
def test_gbli_and_panlex_dictionaries(tmp_path):
    gbli = tmp_path / "yacle.test.freq.2k.en-de.tsv"
    gbli.write_text("dedication\tWidmung\nice cream\tEis\nlonely\nx\ty\tz\n\tleer\nhouse\tHaus\r\n")
    pairs, report = read_bli_dictionary(gbli, "en", "de")
    assert pairs == [("dedication", "Widmung"), ("ice cream", "Eis"), ("house", "Haus")]
    assert report.rows == 3 and report.malformed == 3 and lines_of(report) == [3, 4, 5]
    assert report.examples[0].startswith(f"{gbli}:3: ")

    panlex = tmp_path / "en-fr.test.2000.cc.trans"
    panlex.write_text("dog chien\ndog\tchienne\nhouse  maison\ncat chat\n")
    pairs, report = read_bli_dictionary(panlex, "en", "fr")
    assert pairs == [("dog", "chien"), ("dog", "chienne"), ("cat", "chat")]
    assert report.malformed == 1 and lines_of(report) == [3]  # two spaces: an empty middle field


# ------------------------------------------------------------------------------ vocabularies
def test_vocabulary_skips_empty_and_duplicate_words(tmp_path):
    path = tmp_path / "xx_vocab.txt"
    path.write_text("the\n\u00a0\n dog \nthe\n\ncat\r\nsan\u00a0francisco\n", encoding="utf-8")
    words, report = read_vocabulary(path)
    assert words == ["the", "dog", "cat", "san\u00a0francisco"]
    assert report.rows == 4 and report.malformed == 3 and lines_of(report) == [2, 4, 5]
    assert "duplicate of line 1" in report.examples[1]


def test_vocabulary_cap_counts_distinct_words(tmp_path):
    path = tmp_path / "xx_vocab.txt"
    path.write_text("a\na\n\nb\nc\nd\n")
    words, report = read_vocabulary(path, max_words=2)
    assert words == ["a", "b"] and report.rows == 2 and report.malformed == 2
    with pytest.raises(ValueError, match="max_words"):
        read_vocabulary(path, max_words=0)
    with pytest.raises(InputError, match="missing_vocab"):
        read_vocabulary(tmp_path / "missing_vocab.txt")


# ------------------------------------------------------------------------------ Multi-SimLex
MSL = (
    "ID,ENG,FRA,PoS,score\n"
    "1,brain,esprit,nouns,3.56\n"
    '2,cheap,"bon, marché",adjectives,5.2\n'
    "3,cover,enterrer,verbs\n"  # 4 columns
    "4,,vide,nouns,1.0\n"  # empty word
    "5,cat,chat,nouns,high\n"  # score not a number
    "\n"
    "7, ice cream ,glace,nouns,6\n"
)


def test_multisimlex_rows_and_malformed(tmp_path):
    path = tmp_path / "ENG-FRA.csv"
    path.write_text(MSL)
    rows, report = read_multisimlex(path, "eng", "fra")
    assert rows == [("brain", "esprit", 3.56), ("cheap", "bon, marché", 5.2), ("ice cream", "glace", 6.0)]
    assert report.rows == 3 and report.malformed == 3 and lines_of(report) == [4, 5, 6]
    swapped, _ = read_multisimlex(path, "FRA", "ENG")
    assert swapped == [(b, a, s) for a, b, s in rows]


def test_multisimlex_header_must_name_both_languages(tmp_path):
    path = tmp_path / "ENG-FRA.csv"
    path.write_text(MSL)
    with pytest.raises(InputError, match="ENG-FRA.csv.*ID,ENG,SPA,PoS,score"):
        read_multisimlex(path, "ENG", "SPA")
    bad = tmp_path / "bad.csv"
    bad.write_text("word1,word2,score\na,b,1\n")
    with pytest.raises(InputError, match="bad.csv"):
        read_multisimlex(bad, "ENG", "FRA")


def test_multisimlex_path_takes_either_order(tmp_path):
    (tmp_path / "multisimlex").mkdir()
    (tmp_path / "multisimlex" / "ENG-FRA.csv").write_text(MSL)
    assert multisimlex_path(tmp_path, "fra", "eng") == tmp_path / "multisimlex" / "ENG-FRA.csv"
    assert multisimlex_path(tmp_path, "eng", "fra") == tmp_path / "multisimlex" / "ENG-FRA.csv"


# ------------------------------------------------------------------------------ Tatoeba
def test_tatoeba_aligned_pairs_and_empty_sides(tmp_path):
    src, eng = tatoeba_paths(tmp_path, "deu")
    assert (src.name, eng.name) == ("tatoeba.deu-eng.deu", "tatoeba.deu-eng.eng")
    src.parent.mkdir()
    src.write_text("Hallo.\r\n\nWie geht's?\nDanke.\n")
    eng.write_text("Hello.\r\nEmpty source.\nHow are you?\n \n")
    s, e, report = read_tatoeba(src, eng)
    assert s == ["Hallo.", "Wie geht's?"] and e == ["Hello.", "How are you?"]
    assert report.rows == 2 and report.malformed == 2 and lines_of(report) == [2, 4]
    assert str(eng) in report.examples[1]


def test_tatoeba_length_mismatch_names_both_files(tmp_path):
    src, eng = tmp_path / "tatoeba.fra-eng.fra", tmp_path / "tatoeba.fra-eng.eng"
    src.write_text("Bonjour.\nMerci.\n")
    eng.write_text("Hello.\n")
    with pytest.raises(InputError) as err:
        read_tatoeba(src, eng)
    assert str(src) in str(err.value) and str(eng) in str(err.value)


# ------------------------------------------------------------------------------ shared data
@pytest.fixture
def eval_dir():
    if not EVAL_DIR.is_dir():
        pytest.skip(f"shared data not found at {EVAL_DIR}")
    return EVAL_DIR


def test_real_gbli_en_de_test_dictionary(eval_dir):
    pairs, report = read_bli_dictionary(gbli_test_path(eval_dir, "en", "de"), "en", "de")
    assert len(pairs) == 2000 and report.malformed == 0
    assert pairs[0] == ("dedication", "Widmung")


def test_real_vocabulary_slice(eval_dir):
    words, report = read_vocabulary(vocab_path(eval_dir, "de"), max_words=500)
    assert len(words) == 500 == report.rows and len(set(words)) == 500
    assert all(w == w.strip() and w for w in words)


def test_real_multisimlex_eng_fra(eval_dir):
    rows, report = read_multisimlex(multisimlex_path(eval_dir, "ENG", "FRA"), "ENG", "FRA")
    assert len(rows) == report.rows > 2000
    # the released file has two pairs scored 'nan': counted and skipped
    assert report.malformed == 2 and all("'nan'" in e for e in report.examples)
    assert rows[0] == ("brain", "esprit", 3.56)
    assert all(0.0 <= score <= 6.0 for _, _, score in rows)


@pytest.mark.parametrize("lang", ["deu", "fra"])
def test_real_tatoeba(eval_dir, lang):
    src, eng, report = read_tatoeba(*tatoeba_paths(eval_dir, lang))
    assert len(src) == len(eng) == 1000 and report.malformed == 0
    if lang == "deu":
        assert src[0] == "Maria sagte, sie wisse nicht, wo Tom sei."
        assert eng[0] == "Mary said she didn't know where Tom was."
