"""distalign.data.omw: every OMW tab-file variation on hand-made files, then mining on the real ../shared/data."""

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import wordfreq

from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
from distalign.data.mining import SYNSET_SCHEMA
from distalign.data.omw import mine_omw, omw_files, read_omw, read_omw_file
from distalign.errors import ConfigError, InputError

OMW_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "lexicons" / "omw"

FRA = (  # prefixed types, indexed and unindexed definitions, CRLF, comments, ignored kinds
    "# WOLF (Wordnet Libre du Français)\tfra\thttp://alpage.inria.fr/\tCeCILL-C\n"
    "00001740-n\tfra:lemma\tentité\n"
    "00001740-n\tfra:lemma\tchose\n"
    "00001740-n\tfra:def\t1\tqui existe.\n"
    "00001740-n\tfra:def\t0\tce qui est perçu\n"
    "00001740-n\tfra:exe\t0\tune entité abstraite\n"
    "02084071-n\tfra:lemma\tchien\r\n"
    "02084071-n\tfra:def\tanimal domestique\n"
    "\n"
    "# a comment inside the file\n"
    "02084071-n\tfra:lemma\tpomme_de_terre\n"
    "09999999-v\tfra:def\t0\ta gloss without lemmas\n"
)
POR = (  # no language prefix on the type column
    "# OpenWN-PT\tpor\thttps://github.com/arademaker/openWordnet-PT\tCC BY-SA\n"
    "00001740-n\tlemma\tente\n"
    "02084071-n\tlemma\tcão\n"
    "02084071-n\tlemma\tcachorro\n"
    "02084071-n\tdef\t0\tanimal doméstico\n"
)
ARB = (  # Arabic: roots and broken plurals are other lemma kinds, not synonyms
    "# Arabic WordNet (AWN v2)\tarb\thttp://www.globalwordnet.org/AWN/\tCC BY SA 3.0\n"
    "02084071-n\tarb:lemma\tكَلْب\n"
    "02084071-n\tarb:lemma:root\tكلب\n"
    "02084071-n\tarb:lemma:brokenplural\tكِلَاب\n"
)
MALFORMED = (
    "# a file with one good row\tita\n"
    "02084071-n\tita:lemma\tcane\n"  # line 2
    "2084071-n\tita:lemma\tbad offset\n"  # 3
    "02084071-x\tita:lemma\tbad pos\n"  # 4
    "02084071-n\tita:lemma\n"  # 5: no text column
    "02084071-n\tita:lemma\t \n"  # 6: empty lemma
    "02084071-n\tfra:lemma\tchien\n"  # 7: another language
    "02084071-n\tita:def\tx\tindex not a number\n"  # 8
    "02084071-n\tita:synonym\tcane\n"  # 9: unknown type
    "02084071-n\tita:lemma\tcane\textra\n"  # 10: a lemma with 4 columns
)


@pytest.fixture
def omw_dir(tmp_path):
    for code, text in {"fra": FRA, "por": POR, "arb": ARB, "ita": MALFORMED}.items():
        (tmp_path / f"wn-data-{code}.tab").write_text(text, encoding="utf-8")
    (tmp_path / "LICENSE-fra").write_text("not a wordnet")
    return tmp_path


def rows(table):
    return [tuple(r.values()) for r in table.to_pylist()]


def test_prefixed_file_with_both_gloss_forms(omw_dir):
    table, report = read_omw_file(omw_dir / "wn-data-fra.tab", "fr")
    assert table.schema == SYNSET_SCHEMA
    entity = "ce qui est perçu; qui existe."  # def sentences joined in index order
    assert rows(table) == [
        ("omw:00001740-n", "fr", "entité", entity),
        ("omw:00001740-n", "fr", "chose", entity),
        ("omw:02084071-n", "fr", "chien", "animal domestique"),
        ("omw:02084071-n", "fr", "pomme_de_terre", "animal domestique"),  # MWEs are mining's business
    ]
    assert report.rows == 4 and report.malformed == 0
    assert report.glossed_synsets == 3 and dict(report.ignored) == {"exe": 1}


def test_unprefixed_file_and_other_lemma_kinds(omw_dir):
    por, report = read_omw_file(omw_dir / "wn-data-por.tab", "pt")
    assert rows(por) == [
        ("omw:00001740-n", "pt", "ente", None),
        ("omw:02084071-n", "pt", "cão", "animal doméstico"),
        ("omw:02084071-n", "pt", "cachorro", "animal doméstico"),
    ]
    arb, report = read_omw_file(omw_dir / "wn-data-arb.tab", "ar")
    assert rows(arb) == [("omw:02084071-n", "ar", "كَلْب", None)]
    assert dict(report.ignored) == {"lemma:root": 1, "lemma:brokenplural": 1} and report.malformed == 0


def test_malformed_rows_are_counted_with_file_and_line(omw_dir):
    table, report = read_omw_file(omw_dir / "wn-data-ita.tab", "it")
    assert rows(table) == [("omw:02084071-n", "it", "cane", None)]
    assert report.malformed == 8
    path = omw_dir / "wn-data-ita.tab"
    assert [e.split(": ")[0] for e in report.examples] == [f"{path}:{n}" for n in (3, 4, 5, 6, 7)]
    assert "another language" in report.examples[4]
    assert "8 malformed rows skipped" in report.summary()


def test_languages_map_to_files_and_errors_name_them(omw_dir):
    files = omw_files(omw_dir)
    assert {lang: p.name for lang, p in files.items()} == {
        "ar": "wn-data-arb.tab",
        "fr": "wn-data-fra.tab",
        "it": "wn-data-ita.tab",
        "pt": "wn-data-por.tab",
    }
    table, reports = read_omw(omw_dir, ["pt", "fr"])
    assert table["lang"].to_pylist() == ["pt"] * 3 + ["fr"] * 4 and len(reports) == 2
    with pytest.raises(InputError, match="'es'"):
        read_omw(omw_dir, ["fr", "es"])
    with pytest.raises(InputError, match="nowhere"):
        omw_files(omw_dir / "nowhere")
    (omw_dir / "wn-data-heb.tab").write_text("# Hebrew\theb\n00001740-n\theb:def\t0\tonly a gloss\n")
    with pytest.raises(InputError, match="wn-data-heb.tab: no lemma rows"):
        read_omw(omw_dir, ["he"])


def test_mine_omw_writes_parquet_and_prints_summary(omw_dir, tmp_path, capsys):
    exclude = tmp_path / "yacle.test.freq.2k.fr-pt.tsv"
    exclude.write_text("chose\tcoisa\n")
    out = tmp_path / "out" / "constraints.parquet"
    table, report = mine_omw(omw_dir, ["fr", "pt"], top_k=15000, exclude_paths=[exclude], out_path=out)
    # entité (rank < 15000) pairs with ente only if ente is frequent in Portuguese: check, do not assume
    ente = "ente" in wordfreq.top_n_list("pt", 15000)
    expected = [("omw:00001740-n", "fr", "entité", "pt", "ente")] * ente + [
        ("omw:02084071-n", "fr", "chien", "pt", "cachorro"),
        ("omw:02084071-n", "fr", "chien", "pt", "cão"),
        ("omw:02084071-n", "pt", "cachorro", "pt", "cão"),
    ]
    got = [(r["synset_id"], r["lang1"], r["word1"], r["lang2"], r["word2"]) for r in table.to_pylist()]
    assert got == expected
    assert table.to_pylist()[-1]["gloss1"] == "animal domestique"  # a Portuguese word gets another language's gloss
    assert report.excluded["fr"] == 1 and report.mwe["fr"] == 1
    assert pq.read_table(out).equals(table) and table.schema == CONSTRAINT_SCHEMA
    printed = capsys.readouterr().out
    assert "wn-data-fra.tab: 4 rows read" in printed and f"wrote {len(table)} constraints" in printed


def test_languages_and_exclusion_files_in_any_form_of_their_codes_mine_the_same(omw_dir, tmp_path, capsys):
    """--languages fra,Portuguese is fr,pt; an evaluation file named ...fra-por.tsv holds out fr and pt words."""
    iso639_1, iso639_3 = tmp_path / "yacle.test.freq.2k.fr-pt.tsv", tmp_path / "yacle.test.freq.2k.fra-por.tsv"
    for path in (iso639_1, iso639_3):
        path.write_text("chose\tcoisa\n")
    expected, report = mine_omw(omw_dir, ["fr", "pt"], top_k=15000, exclude_paths=[iso639_1])
    table, other = mine_omw(omw_dir, ["fra", "Portuguese", "FR"], top_k=15000, exclude_paths=[iso639_3])
    assert table.equals(expected) and other.languages == ["fr", "pt"] and other.excluded["fr"] == 1
    with pytest.raises(ConfigError, match=r"^languages \(--languages\): 'qq' is not a language code"):
        mine_omw(omw_dir, ["fr", "qq"])


@pytest.mark.skipif(not OMW_DIR.is_dir(), reason=f"shared data not found at {OMW_DIR}")
def test_real_omw_french_italian():
    table, report = mine_omw(OMW_DIR, ["fr", "it"], top_k=15000)
    records = table.to_pylist()
    dog = [r for r in records if (r["word1"], r["word2"]) == ("chien", "cane")]
    assert [r["synset_id"] for r in dog] == ["omw:02084071-n"]
    # each word glossed in the other language (BabelBERT §3.1); WOLF (French) has no glosses
    assert dog[0]["gloss1"].startswith("mammifero domestico") and dog[0]["gloss2"] is None
    top = {lang: set(wordfreq.top_n_list(lang, 15000)) for lang in ("fr", "it")}
    assert all(r["word1"] in top[r["lang1"]] and r["word2"] in top[r["lang2"]] for r in records)
    assert not any(" " in r["word1"] + r["word2"] or "_" in r["word1"] + r["word2"] for r in records)
    # measured on this data: fr-fr 26483, fr-it 28959, it-it 7701
    assert report.pairs["fr-it"] > 20000 and report.pairs["fr-fr"] > 10000 and report.pairs["it-it"] > 5000
    unordered = {(r["synset_id"], frozenset([(r["lang1"], r["word1"]), (r["lang2"], r["word2"])])) for r in records}
    assert len(unordered) == len(records)  # no pair twice within a synset
