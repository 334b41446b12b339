"""A dictionary's declared pair against its name and words, its header row, and its casing against the model's
(``distalign.data.dictionary_checks``); the wrong declarations that stop a command are rows of test_bad_inputs.py."""

from __future__ import annotations

import pytest

from distalign.data.dictionary_checks import check_against_corpora, corpus_words, lower_cased
from distalign.data.readers import read_dictionary
from distalign.errors import InputError


def test_a_header_row_is_skipped_and_reported_not_read_as_a_pair(tmp_path):
    for header in ("source\ttarget", "en\tde", "English\tGerman", "SRC TGT"):
        path = tmp_path / "test.tsv"
        path.write_text(f"{header}\nhouse\tHaus\ncat\tKatze\n")
        table, report = read_dictionary(path, "en", "de")
        assert table["word1"].to_pylist() == ["house", "cat"], header
        assert report.header == header and report.malformed == 0
        assert f"(and the header row {header!r})" in report.summary()


def test_a_first_pair_that_only_looks_like_languages_stays_a_pair(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("english\tenglisch\nhouse\tHaus\n")  # "englisch" names no language: a pair
    table, report = read_dictionary(path, "en", "de")
    assert table["word1"].to_pylist() == ["english", "house"] and not report.header


@pytest.mark.parametrize("name", ["en-de.test.2000.cc.trans", "yacle.train.freq.5k.en-de.tsv", "en-de.txt"])
def test_a_pair_in_the_file_name_must_be_the_declared_one(tmp_path, name):
    path = tmp_path / name
    path.write_text("house\tHaus\n")
    assert len(read_dictionary(path, "eng", "German")[0]) == 1  # any form of the same codes
    with pytest.raises(InputError, match="declared de-en .*its name says it is en-de.*the other way round"):
        read_dictionary(path, "de", "en")


def test_an_undeclared_seed_list_is_read_whatever_its_name_says(tmp_path):
    """``static align``'s seed dictionary names no languages: its name and words are not checked against a pair (it
    was read as declared "src-tgt", which language codes take for Sardinian and Tagbanwa)."""
    path = tmp_path / "seed.xb-xa.tsv"
    path.write_text("source\ttarget\nhouse\tдом\n")
    table, report = read_dictionary(path)
    assert table["word1"].to_pylist() == ["house"] and table["word2"].to_pylist() == ["дом"]
    assert report.header == "source\ttarget"


def test_a_column_in_another_script_than_its_language_is_named(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("дом\thouse\nкот\tcat\n")
    assert len(read_dictionary(path, "ru", "en")[0]) == 2
    with pytest.raises(
        InputError, match=r"column 1 \(lang1: en\) are in Cyrillic letters, not Latin .*they look like ru's"
    ):
        read_dictionary(path, "en", "ru")
    path.write_text("xhaus\txhouse\n")  # synthetic languages have no script to check
    assert len(read_dictionary(path, "xa", "xb")[0]) == 1


def test_columns_are_checked_against_each_languages_corpus():
    words = corpus_words({"en": ["The house, the cat and the dog."], "de": ["Das Haus; die Katze und der Hund!"]})
    assert words["de"] == {"das", "haus", "die", "katze", "und", "der", "hund"}
    english, german = ["house", "cat", "dog"], ["Haus", "Katze", "Hund"]
    check_against_corpora("d.tsv", "en", "de", english, german, words)
    with pytest.raises(
        InputError,
        match=r"column 1 \(lang1: de\) are words of the en corpus \(0% in the de corpus; "
        r"0% of column 2's\) \(the pair may be declared the wrong way round\)",
    ):
        check_against_corpora("d.tsv", "de", "en", english, german, words)
    check_against_corpora("d.tsv", "en", "fi", english, ["talo", "kissa", "koira"], words)  # fi: zero-shot, no match
    with pytest.raises(InputError, match=r"column 2 \(lang2: fr\) are words of the de corpus \(no fr corpus"):
        check_against_corpora("d.tsv", "en", "fr", english, german, words)
    check_against_corpora("d.tsv", "en", "fr", english[:2], german[:2], words)  # two words: too few to judge


def test_lower_cased():
    assert lower_cased(["haus", "katze", "42"]) and not lower_cased(["Haus", "katze"]) and not lower_cased(["42"])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from transfer_data import tiny_model

    return tiny_model(tmp_path_factory.mktemp("model") / "model")


def prepared_eval(argv):
    from distalign.cli import build_parser
    from distalign.eval.checkpoint_eval import prepare_eval

    return prepare_eval(build_parser(command="eval").parse_args(["eval", *argv]))


def test_eval_with_only_a_dictionary_needs_no_benchmark_folder_and_names_its_casing(
    model, tmp_path, monkeypatch, capsys
):
    """No --tasks, --bli-pairs or --eval-dir, and no benchmark folder where the default points: the dictionary's BLI
    alone is prepared (before this, the default suite's folder was demanded); its header row is no test pair; a
    lower-case dictionary with the model's cased tokenizer is named."""
    monkeypatch.chdir(tmp_path)  # ../shared/data/eval is not there
    dictionary = tmp_path / "mine.tsv"
    dictionary.write_text("source\ttarget\nanna\tanna\nsees\tsieht\nrome\trom\n")
    prepared = prepared_eval(["--model", str(model), "--dictionary", f"en-de:{dictionary}", "--no-mlflow"])
    [task] = prepared.tasks
    assert (task.name, task.lang1, task.lang2) == ("bli", "en", "de")
    assert sorted(task.queries) == ["anna", "rome", "sees"]
    out = capsys.readouterr().out
    assert "NOTE the test dictionaries en-de are all lower case and the tokenizer" in out and "is cased" in out
    dictionary.write_text("Anna\tAnna\nsees\tsieht\nRome\tRom\n")
    prepared_eval(["--model", str(model), "--dictionary", f"en-de:{dictionary}", "--no-mlflow"])
    assert "NOTE" not in capsys.readouterr().out


def test_eval_checks_a_dictionary_against_the_frequency_lists_of_the_benchmark_folder(model, tmp_path):
    """With ``vocab/<lang>_vocab.txt`` of both languages in --eval-dir, a --dictionary declared the wrong way round
    (and named without its pair) is refused before the model is encoded; declared right, it is prepared."""
    vocab = tmp_path / "eval" / "vocab"
    vocab.mkdir(parents=True)
    (vocab / "en_vocab.txt").write_text("the\nhouse\ncat\ndog\nsees\nrome\n")
    (vocab / "de_vocab.txt").write_text("der\nhaus\nkatze\nhund\nsieht\nrom\n")
    dictionary = tmp_path / "mine.tsv"
    dictionary.write_text("house\tHaus\ncat\tKatze\ndog\tHund\n")
    flags = ["--model", str(model), "--eval-dir", str(tmp_path / "eval"), "--no-mlflow"]
    with pytest.raises(
        InputError,
        match=r"suite.dictionaries\[0\] \(--dictionary\) .*mine.tsv: declared de-en, but "
        r"100% of the words of column 1 \(lang1: de\) are words of the en frequency "
        r"list .*wrong way round",
    ):
        prepared_eval([*flags, "--dictionary", f"de-en:{dictionary}"])
    assert [t.pair for t in prepared_eval([*flags, "--dictionary", f"en-de:{dictionary}"]).tasks] == ["en-de"]
