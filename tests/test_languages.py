"""One language-code normalisation (``distalign.languages``) for every reader: ISO 639-1, 639-2, 639-3, BabelNet's
upper case and English names to one canonical code; an unknown code names its key or file; an evaluation dictionary
in ``eng``/``deu`` holds its words out of ``en``/``de`` training pairs."""

import ast
import dataclasses
import importlib
import typing
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import QUICKSTART, SMALL

from distalign.config import ConfigError, load_config
from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
from distalign.data.corpus_stream import list_corpus_files
from distalign.data.readers import read_constraints, read_dictionary, read_parallel_tsv
from distalign.data.sources import CorpusSource
from distalign.languages import LanguageCode, code_in_data, iso639_3, language_code
from distalign.preparation.inputs import prepare_data
from distalign.transfer.data import language_folder
from distalign.typology import uriel_code

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "given, canonical, alpha3",
    [
        ("de", "de", "deu"),
        ("deu", "de", "deu"),
        ("ger", "de", "deu"),
        ("DE", "de", "deu"),
        ("German", "de", "deu"),
        ("eng", "en", "eng"),
        ("en-GB", "en", "eng"),
        ("en_GB", "en", "eng"),
        ("Deutsch", "de", "deu"),
        (" fi ", "fi", "fin"),
        ("cmn", "zh", "zho"),
        ("arb", "ar", "ara"),
        ("zsm", "ms", "msa"),  # macrolanguage members: the macrolanguage
        ("nob", "nb", "nob"),
        ("iw", "he", "heb"),
        ("fil", "fil", "fil"),  # no ISO 639-1 code: ISO 639-3
        ("tgl", "tl", "tgl"),
        ("TL", "tl", "tgl"),
        ("hbs", "sh", "hbs"),  # CLDR merges them, ISO 639 and URIEL do not
        ("sr-Latn", "sr-Latn", "srp"),
        ("en-Latn", "en", "eng"),  # a script kept where it tells something
        ("xa", "xa", "xa"),
        ("xh", "xh", "xho"),  # the synthetic world's languages; Xhosa stays Xhosa
    ],
)
def test_every_form_of_a_code_reads_as_one_canonical_code(given, canonical, alpha3):
    assert language_code(given, "k") == canonical
    assert iso639_3(given, "k") == alpha3


@pytest.mark.parametrize("bad", ["", "und", "klingonish", "deutsch-ish", "12"])
def test_an_unknown_code_names_its_key(bad):
    with pytest.raises(ConfigError, match=r"^data\.corpora\[1\]\.lang: "):
        language_code(bad, "data.corpora[1].lang")


TATOEBA_LIKE = ["ara", "arz", "cmn", "deu", "dtp", "kzj", "pes", "yue"]


@pytest.mark.parametrize(
    "given, found",
    [
        ("deu", "deu"),
        ("DEU", "deu"),
        ("de", "deu"),
        ("German", "deu"),
        ("ger", "deu"),
        ("ar", "ara"),
        ("Arabic", "ara"),
        ("arz", "arz"),  # the macrolanguage's own file before a variety's
        ("zh", "cmn"),
        ("fa", "pes"),  # the one file of the language, under a member's code
        ("yue", "yue"),
        ("kzj", "kzj"),
        ("dtp", "dtp"),  # a code the data set has is taken as it is
        ("no", "nob"),
        ("Norwegian", "nob"),
        ("nb", "nob"),  # Norwegian's one written standard here, apart in ISO 639-1
    ],
)
def test_a_data_sets_own_code_is_found_for_any_form_of_the_language(given, found):
    assert code_in_data(given, TATOEBA_LIKE + ["nob"], "k", "the set") == found


@pytest.mark.parametrize(
    "given, says",
    [
        (
            "fr",
            r"^k: no data for 'fr' \(language fr, ISO 639-3 fra\); the set holds: ara, arz, cmn, deu, dtp, kzj, pes, "
            r"yue$",
        ),
        ("Frnch", r"^k: 'Frnch' is not a language code .*; the set holds: ara, arz,"),
        ("zh", r"^k: 'zh' \(language zh\) is in the set under several codes \(chi, cmn\): give one of them$"),
        ("no", r"^k: 'no' \(language no\) is in the set under several codes \(nno, nob\): give one of them$"),
    ],
)
def test_a_language_the_data_set_lacks_names_the_key_and_what_it_holds(given, says):
    available = TATOEBA_LIKE + {"zh": ["chi"], "no": ["nno", "nob"]}.get(given, [])
    with pytest.raises(ConfigError, match=says):
        code_in_data(given, available, "k", "the set")


def test_a_config_reads_its_language_keys_through_the_one_function(tmp_path):
    corpus = tmp_path / "de.txt"
    corpus.write_text("ein Satz\n")
    config = load_config(
        QUICKSTART,
        SMALL
        + [
            "data.source=files",
            f"data.corpora=[{{path: {corpus}, lang: deu}}]",
            f"data.eval_dictionaries=[{{path: {corpus}, lang1: eng, lang2: German}}]",
            "eval.languages=[eng, deu]",
            "eval.test_languages=[FIN]",
            "data.constraint_languages=[ger, eng]",
            "objectives.lexical.weight=0",
        ],
    )
    assert config.data.corpora[0].lang == "de"
    assert (config.data.eval_dictionaries[0].lang1, config.data.eval_dictionaries[0].lang2) == ("en", "de")
    assert (config.eval.languages, config.eval.test_languages) == (["en", "de"], ["fi"])
    assert config.data.constraint_languages == ["de", "en"]
    with pytest.raises(ConfigError, match=r"data\.corpora\[0\]\.lang: 'deutsch-ish' is not a language code"):
        load_config(QUICKSTART, SMALL + ["data.source=files", f"data.corpora=[{{path: {corpus}, lang: deutsch-ish}}]"])
    with pytest.raises(ConfigError, match=r"eval\.test_languages\[1\]: 'qq1'"):
        load_config(QUICKSTART, SMALL + ["eval.test_languages=[fi, qq1]"])


def test_every_file_reader_gives_canonical_codes(tmp_path):
    """Each reader of a language code, fed ISO 639-3 / upper-case / bibliographic codes, gives the canonical ones."""
    text = tmp_path / "words.txt"
    text.write_text("haus\tHaus\nbaum\tBaum\n")
    table, _ = read_dictionary(text, "eng", "ger")
    assert set(table["lang1"].to_pylist()) == {"en"} and set(table["lang2"].to_pylist()) == {"de"}
    babelnet = tmp_path / "babelnet.tsv"
    babelnet.write_text("bn:1\tEN\tDE\thouse\tHaus\t\t\nbn:1\tEN\tFR\thouse\tmaison\t\t\n")
    table, _ = read_constraints(babelnet)
    assert table["lang1"].to_pylist() == ["en", "en"] and table["lang2"].to_pylist() == ["de", "fr"]
    parquet = tmp_path / "constraints.parquet"
    pq.write_table(
        pa.table(
            {
                "word1": ["dog"],
                "lang1": ["eng"],
                "word2": ["Hund"],
                "lang2": ["deu"],
                "synset_id": ["s1"],
                "gloss1": [None],
                "gloss2": [None],
            },
            schema=CONSTRAINT_SCHEMA,
        ),
        parquet,
    )
    table, _ = read_constraints(parquet)
    assert (table["lang1"].to_pylist(), table["lang2"].to_pylist()) == (["en"], ["de"])
    assert table.schema == CONSTRAINT_SCHEMA
    pq.write_table(
        pa.table(
            {
                "word1": ["dog"],
                "lang1": ["eng"],
                "word2": ["Hund"],
                "lang2": ["dutch-ish"],
                "synset_id": ["s1"],
                "gloss1": [None],
                "gloss2": [None],
            },
            schema=CONSTRAINT_SCHEMA,
        ),
        parquet,
    )
    with pytest.raises(ConfigError, match=f"{parquet}: column lang2: 'dutch-ish'"):
        read_constraints(parquet)
    assert list_corpus_files(CorpusSource(str(text), "deu"), "data.corpora[0]").lang == "de"
    table, _ = read_parallel_tsv(text, "eng", "deu")
    assert (table["lang1"][0].as_py(), table["lang2"][0].as_py()) == ("en", "de")
    assert uriel_code("de") == uriel_code("German") == uriel_code("ger") == "deu"  # typology: ISO 639-3
    (tmp_path / "udpos" / "deu").mkdir(parents=True)  # transfer data in a folder named by another code
    assert language_folder(tmp_path / "udpos", language_code("deu", "k")) == tmp_path / "udpos" / "deu"


def _config_roots() -> list[type]:
    """Every dataclass the config loader builds from a file (``load_dataclass(X, ...)`` anywhere in distalign)."""
    roots = []
    for path in sorted((REPO / "distalign").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", "") == "load_dataclass"
                and node.args
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id != "cls"
            ):
                module = ".".join(path.relative_to(REPO).with_suffix("").parts)
                roots.append(getattr(importlib.import_module(module), node.args[0].id))
    return roots


LANGUAGE_KEY = ("lang", "lang1", "lang2", "source_lang", "target_lang")


def _language_keys(cls: type, prefix: str = "", ancestors: tuple = ()) -> dict[str, typing.Any]:
    """key -> type hint of every field under ``cls`` named like a language (``lang``, ``*languages``, ``*_lang``)."""
    found = {}
    for f in dataclasses.fields(cls):
        hint = typing.get_type_hints(cls)[f.name]
        key = f"{prefix}{f.name}"
        if f.name in LANGUAGE_KEY or f.name.endswith(("languages", "_lang")):
            found[key] = hint
        nested = [hint, *typing.get_args(hint)]
        for inner in nested + [a for n in nested for a in typing.get_args(n)]:
            if dataclasses.is_dataclass(inner) and inner not in ancestors + (cls,):
                found |= _language_keys(inner, f"{key}.", ancestors + (cls,))
    return found


def test_every_config_key_that_names_a_language_is_read_through_the_one_function():
    """A config key holding a language code is typed ``LanguageCode`` (the loader then reads it through
    ``language_code``): a new config file kind or key is found here without being listed."""
    roots = _config_roots()
    assert {"ExperimentConfig", "EvalSpec", "TransferSpec", "StudyConfig"} <= {r.__name__ for r in roots}
    keys = {f"{root.__name__}.{key}": hint for root in roots for key, hint in _language_keys(root).items()}
    assert {
        "ExperimentConfig.data.corpora.lang",
        "ExperimentConfig.data.eval_dictionaries.lang1",
        "ExperimentConfig.eval.test_languages",
        "StudyConfig.language_samples.test_languages",
    } <= set(keys)
    untyped = sorted(
        key
        for key, hint in keys.items()
        if LanguageCode
        not in {hint, *typing.get_args(hint), *(a for n in typing.get_args(hint) for a in typing.get_args(n))}
    )
    assert untyped == []


def test_an_eng_deu_eval_dictionary_holds_its_words_out_of_en_de_training_pairs(tmp_path, monkeypatch):
    """Tatoeba-style ISO 639-3 evaluation dictionary beside ISO 639-1 training data: the test words leave training."""
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    test = [("house", "Haus"), ("tree", "Baum"), ("river", "Fluss")]
    train = [(f"w{i}", f"W{i}") for i in range(40)]
    (tmp_path / "train.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in train + test))
    (tmp_path / "test.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in test))
    for lang, side in (("en", 0), ("de", 1)):
        (tmp_path / f"{lang}.txt").write_text(
            "".join(" ".join(p[side] for p in train[i : i + 5] + test) + "\n" for i in range(30))
        )
    config = load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=leak",
            "data.source=files",
            f"data.corpora=[{{path: {tmp_path / 'en.txt'}, lang: en}}, {{path: {tmp_path / 'de.txt'}, lang: de}}]",
            f"data.dictionaries=[{{path: {tmp_path / 'train.tsv'}, lang1: en, lang2: de}}]",
            f"data.eval_dictionaries=[{{path: {tmp_path / 'test.tsv'}, lang1: eng, lang2: deu}}]",
        ],
    )
    prepared = prepare_data(config)
    (pairs,) = prepared.eval_pairs
    assert (pairs.lang1, pairs.lang2) == ("en", "de")
    assert prepared.excluded_constraints == len(test)
    kept = set(zip(prepared.constraints["word1"].to_pylist(), prepared.constraints["word2"].to_pylist()))
    assert kept == set(train) and not kept & set(test)
