"""distalign.data.readers: dictionaries, BabelNet exports, constraint parquet, corpora; malformed rows counted."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
from distalign.data.readers import (
    InputError,
    read_babelnet_export,
    read_constraint_parquet,
    read_constraints,
    read_corpus,
    read_dictionary,
)


def pairs(table):
    return list(zip(table["word1"].to_pylist(), table["word2"].to_pylist()))


# ------------------------------------------------------------------------------ dictionaries
def test_gbli_tab_dictionary(tmp_path):
    path = tmp_path / "en-de.tsv"
    path.write_text("dog\tHund\ncat\tKatze\ndog\tRüde\n\nhouse\tHaus\r\n")
    table, report = read_dictionary(path, "en", "de")
    assert table.schema == CONSTRAINT_SCHEMA
    assert pairs(table) == [("dog", "Hund"), ("cat", "Katze"), ("dog", "Rüde"), ("house", "Haus")]
    assert set(table["lang1"].to_pylist()) == {"en"} and set(table["lang2"].to_pylist()) == {"de"}
    assert report.rows == 4 and report.malformed == 0 and report.examples == []
    synsets = table["synset_id"].to_pylist()
    # translations of one source word share a synset; different source words do not
    assert synsets[0] == synsets[2]
    assert len({synsets[0], synsets[1], synsets[3]}) == 3
    assert table["gloss1"].null_count == 4 and table["gloss2"].null_count == 4


def test_muse_space_dictionary(tmp_path):
    path = tmp_path / "en-fr.txt"
    path.write_text("the le\nthe la\nhouse maison\n")
    table, report = read_dictionary(path, "en", "fr")
    assert pairs(table) == [("the", "le"), ("the", "la"), ("house", "maison")]
    assert report.rows == 3 and report.malformed == 0
    s = table["synset_id"].to_pylist()
    assert s[0] == s[1] != s[2]


def test_dictionary_synset_depends_on_language_pair(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_text("gift\tGift\n")
    en_de, _ = read_dictionary(path, "en", "de")
    de_en, _ = read_dictionary(path, "de", "en")
    assert en_de["synset_id"][0].as_py() != de_en["synset_id"][0].as_py()


def test_dictionary_malformed_lines_are_counted(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text(
        "dog\tHund\n"  # 1 ok
        "a\tb\tc\n"  # 2 three fields
        "cat\t\n"  # 3 empty target
        "\tKatze\n"  # 4 empty source
        "tree\tBaum\n"  # 5 ok
        "lonely\n"
    )  # 6 one field
    table, report = read_dictionary(path, "en", "de")
    assert pairs(table) == [("dog", "Hund"), ("tree", "Baum")]
    assert report.rows == 2 and report.malformed == 4
    assert [e.split(": ")[0] for e in report.examples] == [f"{path}:{n}" for n in (2, 3, 4, 6)]
    assert "4 malformed" in report.summary() and f"{path}:2" in report.summary()


def test_dictionary_examples_are_capped_but_all_counted(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("".join(f"x{i}\ty\tz\n" for i in range(12)) + "ok\tfine\n")
    table, report = read_dictionary(path, "en", "de")
    assert report.malformed == 12 and len(report.examples) == 5
    assert len(table) == 1


def test_missing_dictionary_raises(tmp_path):
    with pytest.raises(InputError, match="missing.tsv"):
        read_dictionary(tmp_path / "missing.tsv", "en", "de")


# ------------------------------------------------------------------------------ BabelNet
BN_ROWS = [
    "bn:001n\ten\tde\tdog\tHund\ta domestic animal\tein Haustier",
    "bn:002n\ten\tit\tcat\tgatto\tfeline\t",
    "bn:003n\tde\tit\tHaus\tcasa",
]


@pytest.mark.parametrize("header", [True, False])
def test_babelnet_export(tmp_path, header):
    path = tmp_path / "bn.tsv"
    lines = (["synsetID\tlang1\tlang2\tword1\tword2\tsent1\tsent2"] if header else []) + BN_ROWS
    path.write_text("\n".join(lines) + "\n")
    table, report = read_babelnet_export(path)
    assert report.malformed == 0 and report.rows == 3 == len(table)
    rows = table.to_pylist()
    assert rows[0] == {
        "word1": "dog",
        "lang1": "en",
        "word2": "Hund",
        "lang2": "de",
        "synset_id": "bn:001n",
        "gloss1": "a domestic animal",
        "gloss2": "ein Haustier",
    }
    assert rows[1]["gloss1"] == "feline" and rows[1]["gloss2"] is None
    assert rows[2] == {
        "word1": "Haus",
        "lang1": "de",
        "word2": "casa",
        "lang2": "it",
        "synset_id": "bn:003n",
        "gloss1": None,
        "gloss2": None,
    }
    same, _ = read_constraints(path)  # .tsv dispatches to the BabelNet reader
    assert same.equals(table)


def test_babelnet_wrong_column_count_and_empty_fields(tmp_path):
    path = tmp_path / "bn.tsv"
    path.write_text(
        "\n".join(
            [
                BN_ROWS[0],
                "bn:9\ten\tde\tdog",  # 4 columns
                "bn:9\ten\tde\tdog\tHund\tgloss",  # 6 columns
                "bn:9\ten\t\tdog\tHund",  # empty language
                BN_ROWS[2],
            ]
        )
        + "\n"
    )
    table, report = read_babelnet_export(path)
    assert table["synset_id"].to_pylist() == ["bn:001n", "bn:003n"]
    assert report.malformed == 3
    assert [e.split(": ")[0] for e in report.examples] == [f"{path}:{n}" for n in (2, 3, 4)]


# ------------------------------------------------------------------------------ constraint parquet
def test_constraint_parquet_roundtrip_and_missing_glosses(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(
        pa.table(
            {
                "word1": ["a", "b"],
                "lang1": ["en", "en"],
                "word2": ["x", "y"],
                "lang2": ["de", "fr"],
                "synset_id": ["s1", "s2"],
                "extra": [1, 2],
            }
        ),
        path,
    )
    table, report = read_constraints(path)
    assert table.schema == CONSTRAINT_SCHEMA
    assert pairs(table) == [("a", "x"), ("b", "y")]
    assert table["gloss1"].null_count == 2
    assert report.rows == 2 and report.malformed == 0


def test_constraint_parquet_missing_column(tmp_path):
    path = tmp_path / "nolang.parquet"
    pq.write_table(pa.table({"word1": ["a"], "word2": ["x"], "lang2": ["de"], "synset_id": ["s"]}), path)
    with pytest.raises(InputError) as err:
        read_constraint_parquet(path)
    assert str(path) in str(err.value) and "lang1" in str(err.value)


def test_constraint_parquet_null_and_empty_rows_dropped_and_counted(tmp_path):
    path = tmp_path / "c.parquet"
    pq.write_table(
        pa.table(
            {
                "word1": ["a", None, "c", "  ", "e", "f"],
                "lang1": ["en", "en", "en", "en", "en", None],
                "word2": ["x", "y", "z", "w", "", "v"],
                "lang2": ["de"] * 6,
                "synset_id": ["s1", "s2", None, "s4", "s5", "s6"],
            }
        ),
        path,
    )
    table, report = read_constraint_parquet(path)
    assert pairs(table) == [("a", "x")]
    assert report.rows == 1
    assert report.malformed == 5  # every dropped row is counted, nulls included
    assert [e.split(": ")[0] for e in report.examples] == [f"{path}:{n}" for n in (2, 3, 4, 5, 6)]


def test_unknown_constraint_extension(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("a,b\n")
    with pytest.raises(InputError, match="c.csv"):
        read_constraints(path)


# ------------------------------------------------------------------------------ corpora
def test_txt_corpus(tmp_path):
    path = tmp_path / "en.txt"
    path.write_text("  first sentence \n\nsecond one\n   \nthird\n")
    table, report = read_corpus(path, "en")
    assert table["text"].to_pylist() == ["first sentence", "second one", "third"]
    assert table["lang"].to_pylist() == ["en"] * 3
    assert report.rows == 3 and report.malformed == 0


def test_jsonl_corpus_counts_broken_lines(tmp_path):
    path = tmp_path / "de.jsonl"
    path.write_text(
        "\n".join(
            [
                json.dumps({"text": "Guten Tag", "id": 1}),
                '{"text": "broken',  # 2 invalid JSON
                json.dumps({"body": "no text key"}),  # 3 no "text"
                json.dumps({"text": ""}),  # 4 empty
                json.dumps(["text"]),  # 5 not an object
                json.dumps({"text": 5}),  # 6 not a string
                json.dumps({"text": " Hallo Welt "}),  # 7 ok
            ]
        )
        + "\n"
    )
    table, report = read_corpus(path, "de")
    assert table["text"].to_pylist() == ["Guten Tag", "Hallo Welt"]
    assert table["lang"].to_pylist() == ["de", "de"]
    assert report.rows == 2 and report.malformed == 5
    assert [e.split(": ")[0] for e in report.examples] == [f"{path}:{n}" for n in (2, 3, 4, 5, 6)]


def test_parquet_corpus(tmp_path):
    path = tmp_path / "fr.parquet"
    pq.write_table(pa.table({"text": ["bonjour", None, "  ", "salut tout le monde"], "n": [1, 2, 3, 4]}), path)
    table, report = read_corpus(path, "fr")
    assert table["text"].to_pylist() == ["bonjour", "salut tout le monde"]
    assert report.rows == 2 and report.malformed == 2
    no_text = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"sentence": ["x"]}), no_text)
    with pytest.raises(InputError, match="text"):
        read_corpus(no_text, "fr")


def test_corpus_unknown_extension_and_missing_file(tmp_path):
    path = tmp_path / "en.csv"
    path.write_text("a\n")
    with pytest.raises(InputError, match="en.csv"):
        read_corpus(path, "en")
    with pytest.raises(InputError, match="nope.txt"):
        read_corpus(tmp_path / "nope.txt", "en")
    with pytest.raises(InputError, match="nope.parquet"):
        read_corpus(tmp_path / "nope.parquet", "en")
