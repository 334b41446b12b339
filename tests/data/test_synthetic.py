"""distalign.data.synthetic: the generated world, checked through the files it writes."""

import collections
import itertools

import numpy as np
import pyarrow.parquet as pq
import pytest

from distalign.config import SyntheticConfig
from distalign.data.readers import read_constraints, read_corpus, read_dictionary
from distalign.data.synthetic import generate_world

LANGS = ["xa", "xb", "xc"]
# No synonyms: then every word of every language is in constraints.parquet or an eval dictionary.
CFG = SyntheticConfig(
    languages=LANGS, num_concepts=100, sentences_per_language=1200, synonym_rate=0.0, heldout_fraction=0.2
)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    out = tmp_path_factory.mktemp("world")
    return generate_world(CFG, out, seed=0)


@pytest.fixture(scope="module")
def constraints(world):
    table, report = read_constraints(world.constraints)
    assert report.malformed == 0
    return table.to_pylist()


@pytest.fixture(scope="module")
def eval_pairs(world):
    out = {}
    for src in world.eval_dictionaries:
        table, report = read_dictionary(src.path, src.lang1, src.lang2)
        assert report.malformed == 0
        out[(src.lang1, src.lang2)] = list(zip(table["word1"].to_pylist(), table["word2"].to_pylist()))
    return out


@pytest.fixture(scope="module")
def concept_of(constraints, eval_pairs):
    """(lang, word) -> concept key; held-out concepts keyed by their xa word."""
    concept = {}
    for r in constraints:
        concept[(r["lang1"], r["word1"])] = r["synset_id"]
        concept[(r["lang2"], r["word2"])] = r["synset_id"]
    for (l1, l2), rows in eval_pairs.items():
        for w1, w2 in rows:
            key = concept.setdefault((l1, w1), f"held:{l1}:{w1}")
            concept.setdefault((l2, w2), key)
    return concept


def sentences(world, lang):
    return [line for line in world.corpora[lang].read_text().splitlines() if line]


def test_files_written(world):
    assert world.languages == LANGS
    assert set(world.corpora) == set(LANGS)
    for lang, path in world.corpora.items():
        assert path.name == f"corpus.{lang}.txt" and path.is_file()
        table, report = read_corpus(path, lang)
        assert len(table) == CFG.sentences_per_language and report.malformed == 0
    assert world.constraints.is_file() and pq.read_table(world.constraints).num_rows > 0
    assert [(d.lang1, d.lang2) for d in world.eval_dictionaries] == list(itertools.combinations(LANGS, 2))
    for d in world.eval_dictionaries:
        assert d.path.endswith(f"eval.{d.lang1}-{d.lang2}.tsv")


def test_heldout_words_never_in_constraints(constraints, eval_pairs):
    constrained = {(r["lang1"], r["word1"]) for r in constraints} | {(r["lang2"], r["word2"]) for r in constraints}
    heldout = {(l1, w) for (l1, _), rows in eval_pairs.items() for w, _ in rows} | {
        (l2, w) for (_, l2), rows in eval_pairs.items() for _, w in rows
    }
    assert heldout
    assert not (heldout & constrained)
    # about heldout_fraction of the concepts are held out
    n_heldout = len(eval_pairs[("xa", "xb")])
    assert 0.1 * CFG.num_concepts <= n_heldout <= 0.3 * CFG.num_concepts
    n_train = len({r["synset_id"] for r in constraints})
    assert n_train + n_heldout == CFG.num_concepts


def test_eval_dictionaries_are_consistent_translations(eval_pairs):
    # The three dictionaries list the same held-out concepts: xa->xb->xc must agree with xa->xc.
    ab, ac, bc = dict(eval_pairs[("xa", "xb")]), dict(eval_pairs[("xa", "xc")]), dict(eval_pairs[("xb", "xc")])
    assert set(ab) == set(ac)
    for a, b in ab.items():
        assert bc[b] == ac[a]


def test_constraints_pair_translations_of_one_concept(constraints):
    # A word belongs to exactly one concept: the synset_id is a function of (lang, word).
    synset_of = {}
    for r in constraints:
        for side in ("1", "2"):
            key = (r[f"lang{side}"], r[f"word{side}"])
            assert synset_of.setdefault(key, r["synset_id"]) == r["synset_id"]
    # every training concept has one word per language, all paired with each other
    by_synset = collections.defaultdict(set)
    for r in constraints:
        by_synset[r["synset_id"]].add(frozenset([(r["lang1"], r["word1"]), (r["lang2"], r["word2"])]))
    for edges in by_synset.values():
        words = set().union(*edges)
        assert sorted(lang for lang, _ in words) == LANGS
        assert len(edges) == 3  # all cross-lingual pairs of 3 words
    cross = collections.Counter(
        tuple(sorted((r["lang1"], r["lang2"]))) for r in constraints if r["lang1"] != r["lang2"]
    )
    assert set(cross) == set(itertools.combinations(LANGS, 2))
    assert len(set(cross.values())) == 1  # the same count per language pair


def test_synonyms_give_monolingual_pairs(tmp_path):
    world = generate_world(
        SyntheticConfig(languages=["xa", "xb"], num_concepts=60, sentences_per_language=50, synonym_rate=0.5),
        tmp_path,
        seed=3,
    )
    rows = pq.read_table(world.constraints).to_pylist()
    mono = [r for r in rows if r["lang1"] == r["lang2"]]
    assert mono
    words = collections.defaultdict(set)
    for r in rows:
        words[r["synset_id"]] |= {(r["lang1"], r["word1"]), (r["lang2"], r["word2"])}
    for r in mono:  # synonyms are still translations of the same concept's other words
        assert r["word1"] != r["word2"]
        assert {("xa", "xb")} <= {
            tuple(sorted((a[0], b[0]))) for a in words[r["synset_id"]] for b in words[r["synset_id"]]
        }


def test_corpora_use_only_their_own_language(world, concept_of):
    vocab = {lang: {w for (word_lang, w) in concept_of if word_lang == lang} for lang in LANGS}
    for lang in LANGS:
        tokens = [w for s in sentences(world, lang) for w in s.split()]
        assert set(tokens) <= vocab[lang], f"{lang} corpus has words outside its lexicon"
        assert len(set(tokens)) > 0.5 * CFG.num_concepts
    # vocabularies differ: cognates may coincide, but most concepts have different words per language
    word_of = collections.defaultdict(dict)
    for (lang, w), c in concept_of.items():
        word_of[c][lang] = w
    for a, b in itertools.combinations(LANGS, 2):
        identical = sum(words[a] == words[b] for words in word_of.values())
        assert identical < 0.5 * len(word_of)


def _initial_profile(sents, lang, concept_of):
    """Per concept: share of its occurrences that open a sentence (sensitive to word order)."""
    first, total = collections.Counter(), collections.Counter()
    for s in sents:
        for i, w in enumerate(s.split()):
            c = concept_of[(lang, w)]
            total[c] += 1
            first[c] += i == 0
    return {c: first[c] / total[c] for c in total if total[c] >= 10}


def _corr(p, q):
    keys = sorted(set(p) & set(q))
    return float(np.corrcoef([p[k] for k in keys], [q[k] for k in keys])[0, 1])


def test_languages_differ_in_word_order(world, concept_of):
    profiles, within = {}, {}
    for lang in LANGS:
        sents = sentences(world, lang)
        profiles[lang] = _initial_profile(sents, lang, concept_of)
        # two halves of one corpus agree (same grammar) ...
        within[lang] = _corr(
            _initial_profile(sents[::2], lang, concept_of), _initial_profile(sents[1::2], lang, concept_of)
        )
    assert min(within.values()) > 0.7
    # ... while some language pair orders its concepts differently
    across = [_corr(profiles[a], profiles[b]) for a, b in itertools.combinations(LANGS, 2)]
    assert min(across) < min(within.values()) - 0.3


def test_deterministic_for_a_seed(tmp_path):
    cfg = SyntheticConfig(num_concepts=40, sentences_per_language=100)
    a = generate_world(cfg, tmp_path / "a", seed=5)
    generate_world(cfg, tmp_path / "b", seed=5)
    c = generate_world(cfg, tmp_path / "c", seed=6)
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    for name in names:
        if name.endswith(".parquet"):
            assert pq.read_table(tmp_path / "a" / name).equals(pq.read_table(tmp_path / "b" / name))
        else:
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert a.corpora["xa"].read_text() != c.corpora["xa"].read_text()
    assert not pq.read_table(a.constraints).equals(pq.read_table(c.constraints))
