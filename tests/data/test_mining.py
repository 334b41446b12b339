"""distalign.data.mining: BabelBERT constraint mining on hand-made synsets, with real wordfreq ranks.

Ranks checked with ``wordfreq.top_n_list`` (wordfreq 3.1.1): fr maison 235, chien 1158, chat 1433, demeure 1991,
logis 11609, toutou 26903; it casa 123, cane 1152, gatto 2742, dimora 7011, bastardo 10169, magione 39368;
'week-end' is in no list (wordfreq splits at hyphens).
"""

import pyarrow as pa
import pyarrow.parquet
import pytest
import wordfreq

from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
from distalign.data.mining import (
    SYNSET_SCHEMA,
    english_seed_words,
    mine_constraints,
    read_exclusions,
    synsets_from_constraints,
)
from distalign.data.readers import read_babelnet_export
from distalign.errors import InputError

HOUSE_FR = "lieu d'habitation"
HOUSE_IT = "edificio"
ROWS = [
    # (synset, lang, word, gloss)
    ("s1", "fr", "maison", HOUSE_FR),
    ("s1", "fr", "demeure", None),
    ("s1", "fr", "logis", None),  # rank 11609: in the top 12000, not in the top 10000
    ("s1", "fr", "maison de campagne", None),  # MWE (space)
    ("s1", "it", "magione", HOUSE_IT),  # rare, but its gloss is the synset's Italian gloss
    ("s1", "it", "casa", None),
    ("s1", "it", "dimora", None),
    ("s2", "fr", "chien", None),
    ("s2", "fr", "Chien", None),  # the same word once case-folded: a duplicate
    ("s2", "fr", "toutou", None),  # rare
    ("s2", "it", "cane", None),
    ("s2", "it", "cane_da_guardia", None),  # MWE (underscore)
    ("s2", "de", "Hund", None),  # a language not asked for
    ("s3", "fr", "chat", None),
    ("s3", "fr", "week-end", None),  # hyphenated: not an MWE, dropped by the frequency filter
    ("s3", "it", "gatto", None),
    ("s4", "fr", "chien", None),  # the pair chien-cane again, in another synset
    ("s4", "it", "cane", None),
    ("s5", "fr", None, None),  # invalid
]


def synset_table(rows=ROWS):
    return pa.table({name: list(column) for name, column in zip(SYNSET_SCHEMA.names, zip(*rows))}, schema=SYNSET_SCHEMA)


def pairs(table):
    return list(
        zip(
            table["synset_id"].to_pylist(),
            table["lang1"].to_pylist(),
            table["word1"].to_pylist(),
            table["lang2"].to_pylist(),
            table["word2"].to_pylist(),
        )
    )


HOUSE_PAIRS = [  # top 10000: demeure, maison | casa, dimora; ordered by (language position, word)
    ("s1", "fr", "demeure", "fr", "maison"),
    ("s1", "fr", "demeure", "it", "casa"),
    ("s1", "fr", "demeure", "it", "dimora"),
    ("s1", "fr", "maison", "it", "casa"),
    ("s1", "fr", "maison", "it", "dimora"),
    ("s1", "it", "casa", "it", "dimora"),
]
OTHER_PAIRS = [
    ("s2", "fr", "chien", "it", "cane"),
    ("s3", "fr", "chat", "it", "gatto"),
    ("s4", "fr", "chien", "it", "cane"),
]


def test_ranks_used_by_these_tests():
    top = {lang: wordfreq.top_n_list(lang, 12000) for lang in ("fr", "it")}
    assert top["fr"].index("demeure") < 10000 <= top["fr"].index("logis") < 12000
    assert "toutou" not in top["fr"] and "magione" not in top["it"] and "week-end" not in top["fr"]
    assert all(w in top["fr"][:10000] for w in ("maison", "chien", "chat"))
    assert all(w in top["it"][:10000] for w in ("casa", "cane", "gatto", "dimora"))


def test_all_pairs_of_each_synset_with_counts_and_glosses():
    table, report = mine_constraints(synset_table(), ["fr", "it"], top_k=10000)
    assert table.schema == CONSTRAINT_SCHEMA
    assert pairs(table) == HOUSE_PAIRS + OTHER_PAIRS
    glosses = list(zip(table["gloss1"].to_pylist(), table["gloss2"].to_pylist()))
    # a word's gloss is in another language than the word (BabelBERT §3.1): French words get the Italian gloss
    assert glosses[:6] == [(HOUSE_IT, HOUSE_IT)] + [(HOUSE_IT, HOUSE_FR)] * 4 + [(HOUSE_FR, HOUSE_FR)]
    assert glosses[6:] == [(None, None)] * 3
    assert report.synsets == 4 and report.synsets_with_pairs == 4
    assert dict(report.words) == {"fr": 10, "it": 7}  # the invalid s5 row is not a word
    assert dict(report.mwe) == {"fr": 1, "it": 1}
    assert dict(report.rare) == {"fr": 3, "it": 1}  # logis, toutou, week-end | magione
    assert dict(report.duplicates) == {"fr": 1}
    assert report.excluded.total() == 0
    assert dict(report.pairs) == {"fr-fr": 1, "fr-it": 7, "it-it": 1}
    assert report.repeated_pairs == 1 and report.other_language_rows == 1
    assert report.invalid_rows == 1 and report.invalid_examples[0].startswith("row 19:")
    assert "fr-it: 7" in report.summary()


def test_top_k_boundary_uses_the_real_rank():
    table, report = mine_constraints(synset_table(), ["fr", "it"], top_k=12000)
    house = [p for p in pairs(table) if p[0] == "s1"]
    # logis joins: 5 kept words give 5*4/2 pairs
    assert len(house) == 10 and ("s1", "fr", "demeure", "fr", "logis") in house
    assert report.rare["fr"] == 2


def test_one_direction_only_and_language_order():
    mono, _ = mine_constraints(synset_table(), ["fr", "it"], top_k=10000, cross_lingual=False)
    assert pairs(mono) == [HOUSE_PAIRS[0], HOUSE_PAIRS[5]]
    cross, report = mine_constraints(synset_table(), ["it", "fr"], top_k=10000, monolingual=False)
    assert pairs(cross)[0] == ("s1", "it", "casa", "fr", "demeure")  # the first language of `languages` first
    assert set(report.pairs) == {"it-fr"} and report.pairs["it-fr"] == 7


def test_unique_pairs_keeps_the_first_synset():
    table, report = mine_constraints(synset_table(), ["fr", "it"], top_k=10000, unique_pairs=True)
    assert pairs(table) == HOUSE_PAIRS + OTHER_PAIRS[:2]
    assert report.repeated_pairs == 1 and report.synsets_with_pairs == 3


@pytest.mark.parametrize(
    "exclude",
    [{"fr": ["Maison"], "it": ["dimora"], "de": ["Hund"]}, [("fr", "maison"), ("it", "dimora")]],
)
def test_evaluation_words_are_excluded(exclude):
    table, report = mine_constraints(synset_table(), ["fr", "it"], top_k=10000, exclude=exclude)
    assert [p for p in pairs(table) if p[0] == "s1"] == [("s1", "fr", "demeure", "it", "casa")]
    assert dict(report.excluded) == {"fr": 1, "it": 1}


def test_exclusions_from_gbli_files(tmp_path):
    path = tmp_path / "yacle.test.freq.2k.fr-it.tsv"
    path.write_text("maison\tcasa\nchien\n")
    words, reports = read_exclusions([path])
    assert words == {"fr": {"maison"}, "it": {"casa"}}
    assert reports[0].malformed == 1 and f"{path}:2:" in reports[0].examples[0]
    with pytest.raises(InputError, match="fr_it.txt"):
        read_exclusions([tmp_path / "fr_it.txt"])


def test_babelnet_export_as_synset_table_keeps_each_word_s_own_gloss(tmp_path):
    """An export's sent1 is word1's gloss in a language other than word1's (BabelBERT Table 3), not a gloss in
    lang1: a French word must not get the gloss the export gave the Italian word if that one is French."""
    path = tmp_path / "bn.tsv"
    path.write_text(
        "synsetID\tlang1\tlang2\tword1\tword2\tsent1\tsent2\n"
        "bn:1n\tfr\tit\tchien\tcane\tan animal\tun animal\n"  # chien: an English gloss; cane: a French one
        "bn:1n\tfr\tfr\tchien\ttoutou\t\t\n"
        "bn:1n\tit\tfr\tcane\tChien\tun animal\t\n"
        "bn:2n\tfr\tit\tchat\tgatto\n"
    )
    constraints, _ = read_babelnet_export(path)
    synsets = synsets_from_constraints(constraints)
    assert synsets.schema.names == SYNSET_SCHEMA.names + ["word_gloss"]
    assert sorted(synsets.to_pylist(), key=lambda r: (r["synset_id"], r["lang"], r["word"])) == [
        {"synset_id": "bn:1n", "lang": "fr", "word": "Chien", "gloss": None, "word_gloss": None},
        {"synset_id": "bn:1n", "lang": "fr", "word": "chien", "gloss": None, "word_gloss": "an animal"},
        {"synset_id": "bn:1n", "lang": "fr", "word": "toutou", "gloss": None, "word_gloss": None},
        {"synset_id": "bn:1n", "lang": "it", "word": "cane", "gloss": None, "word_gloss": "un animal"},
        {"synset_id": "bn:2n", "lang": "fr", "word": "chat", "gloss": None, "word_gloss": None},
        {"synset_id": "bn:2n", "lang": "it", "word": "gatto", "gloss": None, "word_gloss": None},
    ]
    table, report = mine_constraints(synsets, ["fr", "it"], top_k=15000)
    assert pairs(table) == [("bn:1n", "fr", "chien", "it", "cane"), ("bn:2n", "fr", "chat", "it", "gatto")]
    assert table.slice(0, 1).select(["gloss1", "gloss2"]).to_pylist() == [
        {"gloss1": "an animal", "gloss2": "un animal"}
    ]
    assert report.duplicates["fr"] == 1
    # min_glosses counts a synset's distinct word glosses: bn:1n has 2, bn:2n none
    kept, report = mine_constraints(synsets, ["fr", "it"], top_k=15000, min_glosses=2)
    assert set(kept["synset_id"].to_pylist()) == {"bn:1n"} and report.few_glosses == 1


def test_cli_mines_a_babelnet_export_into_parquet(tmp_path, capsys):
    from distalign.cli import main

    export, out, exclude = tmp_path / "bn.tsv", tmp_path / "out" / "constraints.parquet", tmp_path / "test.fr-it.tsv"
    export.write_text(
        "bn:1n\tfr\tit\tchien\tcane\tan animal\tun animal\n"
        "bn:1n\tit\tit\tcane\tbastardo\t\t\n"
        "bn:2n\tfr\tit\tchat\tgatto\t\t\n"
        "bn:3n\tfr\tit\tmaison\tcasa\n"
        "a broken line\n"
    )
    exclude.write_text("chat\tgatto\n")  # evaluation words leave the training pairs
    assert (
        main(
            [
                "mine-constraints",
                str(export),
                "--languages",
                "fr,it",
                "--exclude",
                str(exclude),
                "--out",
                str(out),
                "--seed-words",
                "0",
                "--min-glosses",
                "0",
            ]
        )
        == 0
    )
    table = pa.parquet.read_table(out)
    assert pairs(table) == [
        ("bn:1n", "fr", "chien", "it", "bastardo"),
        ("bn:1n", "fr", "chien", "it", "cane"),
        ("bn:1n", "it", "bastardo", "it", "cane"),
        ("bn:3n", "fr", "maison", "it", "casa"),
    ]
    assert table.select(["gloss1", "gloss2"]).to_pylist()[:2] == [
        {"gloss1": "an animal", "gloss2": None},
        {"gloss1": "an animal", "gloss2": "un animal"},
    ]
    printed = capsys.readouterr().out
    assert "bn.tsv" in printed and "1 malformed" in printed and "wrote 4 constraints" in printed


def test_bad_arguments_are_named():
    table = synset_table()
    with pytest.raises(ValueError, match="'gl'"):  # wordfreq alone would silently use Spanish
        mine_constraints(table, ["fr", "gl"])
    with pytest.raises(ValueError, match="top_k"):
        mine_constraints(table, ["fr"], top_k=0)
    with pytest.raises(ValueError, match="languages"):
        mine_constraints(table, [])
    with pytest.raises(ValueError, match="nothing to mine"):
        mine_constraints(table, ["fr"], cross_lingual=False, monolingual=False)
    with pytest.raises(ValueError, match="synsets_table.*gloss"):
        mine_constraints(table.drop_columns(["gloss"]), ["fr"])


def test_croatian_uses_the_serbo_croatian_list():
    rows = [("s", "hr", "pas", None), ("s", "hr", "kuća", None), ("s", "fr", "chien", None)]
    table, _ = mine_constraints(synset_table(rows), ["hr", "fr"], top_k=15000)
    assert pairs(table) == [
        ("s", "hr", "kuća", "hr", "pas"),
        ("s", "hr", "kuća", "fr", "chien"),
        ("s", "hr", "pas", "fr", "chien"),
    ]


SEEDED_ROWS = [
    # (synset, lang, word, gloss, synset_type): BabelBERT §3.1's synset filters
    ("h", "en", "house", "a building", "CONCEPT"),  # seed word, glosses in en and fr: kept
    ("h", "fr", "maison", "un bâtiment", "CONCEPT"),
    ("h", "it", "casa", None, "CONCEPT"),
    ("d", "en", "dog", "an animal", "CONCEPT"),  # seed word, a gloss in one language only
    ("d", "fr", "chien", None, "CONCEPT"),
    ("a", "en", "dwelling", "a home", "CONCEPT"),  # no seed word (rank 10529: a frequent word, no seed)
    ("a", "fr", "demeure", "un logis", "CONCEPT"),
    ("p", "en", "house", "a family", "NAMED_ENTITY"),  # a named entity holding a seed word
    ("p", "fr", "maison", "une famille", "NAMED_ENTITY"),
]


def test_synset_filters_of_section_3_1_drop_and_count():
    rows = [dict(zip(["synset_id", "lang", "word", "gloss", "synset_type"], r)) for r in SEEDED_ROWS]
    table = pa.Table.from_pylist(rows)
    seeds = english_seed_words(1000)
    mined, report = mine_constraints(table, ["en", "fr", "it"], seeds=seeds, min_glosses=2)
    assert {synset for synset, *_ in pairs(mined)} == {"h"}
    assert (report.synsets, report.unseeded, report.named_entities, report.few_glosses) == (4, 1, 1, 1)
    assert (
        "1 without an English seed word, 1 named entities, 1 with glosses in fewer than 2 languages" in report.summary()
    )
    # each filter alone
    assert {p[0] for p in pairs(mine_constraints(table, ["en", "fr", "it"])[0])} == {"h", "d", "a"}  # types only
    assert {p[0] for p in pairs(mine_constraints(table, ["en", "fr", "it"], min_glosses=2)[0])} == {"h", "a"}
    assert {p[0] for p in pairs(mine_constraints(table, ["en", "fr", "it"], seeds=seeds)[0])} == {"h", "d"}
    with pytest.raises(ValueError, match="must include en"):
        mine_constraints(table, ["fr", "it"], seeds=seeds)
    with pytest.raises(ValueError, match="min_glosses"):
        mine_constraints(table, ["en", "fr"], min_glosses=3)


def test_english_seed_words_leave_out_stopwords():
    seeds = english_seed_words(1000)
    assert len(seeds) == 1000 and {"house", "dog"} <= seeds and not {"the", "and", "of"} & seeds
    top = [w for w in wordfreq.top_n_list("en", 2000)]
    assert "dwelling" not in top  # why "dwelling" above is no seed
    assert "house" not in english_seed_words(1000, stopwords=["house"])
    assert english_seed_words(3, stopwords=[]) == frozenset(top[:3])  # no stopwords: the top of the list


def test_cli_applies_the_paper_s_synset_filters_to_a_babelnet_export(tmp_path, capsys):
    from distalign.cli import main

    export, out = tmp_path / "bn.tsv", tmp_path / "constraints.parquet"
    export.write_text(
        "bn:1n\ten\tfr\thouse\tmaison\ta building\tun bâtiment\n"  # seed, 2 gloss languages
        "bn:2n\ten\tfr\tdog\tchien\tan animal\t\n"  # 1 gloss language
        "bn:3n\ten\tfr\tdwelling\tdemeure\ta home\tun logis\n"
    )  # no seed word
    assert main(["mine-constraints", str(export), "--languages", "en,fr", "--out", str(out)]) == 0
    assert [p[0] for p in pairs(pa.parquet.read_table(out))] == ["bn:1n"]
    assert (
        "1 without an English seed word, 0 named entities, 1 with glosses in fewer than 2 languages"
        in capsys.readouterr().out
    )
