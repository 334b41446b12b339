"""The synthetic world's transfer tasks (``data.synthetic.transfer_examples``): POS tags from the grammar, a
balanced same-topic pair task, both read by ``distalign transfer``'s reader, the corpora left unchanged."""

import dataclasses

import numpy as np
import pytest

from distalign.config import SyntheticConfig
from distalign.data.synthetic import UPOS_OF_CLASS, _Grammar, _Language, generate_world, write_transfer_tasks
from distalign.transfer.data import read_split
from distalign.transfer.tasks.registry import TRANSFER_TASKS

CFG = SyntheticConfig(languages=["xa", "xb"], num_concepts=60, sentences_per_language=100, transfer_examples=25)


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("world")
    generate_world(CFG, out, seed=0)
    return out


def test_pos_tags_are_the_grammar_word_classes(tmp_path):
    # A hand-made grammar: concept 0 a noun, 1 a verb, 2 an adjective, all of topic 0; one SVO language with
    # the adjective first. Whatever the draws, each word's tag is its concept's class.
    lang = _Language("xa", np.random.default_rng(0))
    lang.order, lang.adjective_first = "SVO", True
    classes = {"kano": "NOUN", "tiro": "VERB", "belo": "ADJ"}
    grammar = _Grammar({"xa": [["kano"], ["tiro"], ["belo"]]}, np.array(["N", "V", "A"]), np.zeros(3, dtype=int))
    write_transfer_tasks(np.random.default_rng(1), [lang], grammar, 30, tmp_path)
    sentences, report = read_split(TRANSFER_TASKS["udpos"], str(tmp_path), "xa", "train")
    assert len(sentences) == 30 and report.malformed == 0
    upos = TRANSFER_TASKS["udpos"].labels
    shapes = set()
    for s in sentences:
        assert [upos[t] for t in s.tags] == [classes[w] for w in s.words]
        shapes.add(s.words)
    # SVO with optional adjectives before the nouns: only these four sentences exist
    assert shapes == {
        ("kano", "tiro", "kano"),
        ("belo", "kano", "tiro", "kano"),
        ("kano", "tiro", "belo", "kano"),
        ("belo", "kano", "tiro", "belo", "kano"),
    }


def test_files_load_through_the_transfer_reader(world_dir):
    for name in ("udpos", "pawsx"):
        for lang in CFG.languages:
            for split in ("train", "validation", "test"):  # validation is read from dev.<suffix>
                examples, report = read_split(TRANSFER_TASKS[name], str(world_dir / "transfer"), lang, split)
                assert len(examples) == CFG.transfer_examples and report.malformed == 0


def test_pos_tags_match_the_generated_lexicon(world_dir):
    # every word keeps one class across all its sentences, and the three classes all occur
    tags = {}
    for lang in CFG.languages:
        for s in read_split(TRANSFER_TASKS["udpos"], str(world_dir / "transfer"), lang, "test")[0]:
            for w, t in zip(s.words, s.tags):
                assert tags.setdefault((lang, w), t) == t
    upos = TRANSFER_TASKS["udpos"].labels
    assert {upos[t] for t in tags.values()} == set(UPOS_OF_CLASS.values())


def test_pair_task_is_balanced_and_same_topic(world_dir):
    for lang in CFG.languages:
        for split in ("train", "validation", "test"):
            pairs, _ = read_split(TRANSFER_TASKS["pawsx"], str(world_dir / "transfer"), lang, split)
            assert sum(p.label for p in pairs) == CFG.transfer_examples // 2  # 25 examples: 12 same, 13 not
            # same-topic pairs share words more often than different-topic ones (topics have their own words)
            overlap = {
                label: np.mean([bool(set(p.first.split()) & set(p.second.split())) for p in pairs if p.label == label])
                for label in (0, 1)
            }
            assert overlap[1] > overlap[0]


def test_corpora_do_not_change_with_transfer_examples(world_dir, tmp_path):
    plain = generate_world(dataclasses.replace(CFG, transfer_examples=0), tmp_path, seed=0)
    assert not (tmp_path / "transfer").exists()
    for path in plain.corpora.values():
        assert path.read_bytes() == (world_dir / path.name).read_bytes()
    assert plain.constraints.read_bytes() == (world_dir / "constraints.parquet").read_bytes()


# The hand grammar's four sentence shapes per language, each with its tree as (head, relation) per word
SVO_ADJ_FIRST = {
    ("kano", "tiro", "kano"): [(2, "nsubj"), (0, "root"), (2, "obj")],
    ("belo", "kano", "tiro", "kano"): [(2, "amod"), (3, "nsubj"), (0, "root"), (3, "obj")],
    ("kano", "tiro", "belo", "kano"): [(2, "nsubj"), (0, "root"), (4, "amod"), (2, "obj")],
    ("belo", "kano", "tiro", "belo", "kano"): [(2, "amod"), (3, "nsubj"), (0, "root"), (5, "amod"), (3, "obj")],
}
OVS_ADJ_AFTER = {
    ("kano", "tiro", "kano"): [(2, "obj"), (0, "root"), (2, "nsubj")],
    ("kano", "belo", "tiro", "kano"): [(3, "obj"), (1, "amod"), (0, "root"), (3, "nsubj")],
    ("kano", "tiro", "kano", "belo"): [(2, "obj"), (0, "root"), (2, "nsubj"), (3, "amod")],
    ("kano", "belo", "tiro", "kano", "belo"): [(3, "obj"), (1, "amod"), (0, "root"), (3, "nsubj"), (4, "amod")],
}


@pytest.mark.parametrize("order, adjective_first, trees", [("SVO", True, SVO_ADJ_FIRST), ("OVS", False, OVS_ADJ_AFTER)])
def test_pos_sentences_carry_the_grammar_trees(tmp_path, order, adjective_first, trees):
    from distalign.synthetic_languages.syntax_transform import read_conllu

    lang = _Language("xa", np.random.default_rng(0))
    lang.order, lang.adjective_first = order, adjective_first
    grammar = _Grammar({"xa": [["kano"], ["tiro"], ["belo"]]}, np.array(["N", "V", "A"]), np.zeros(3, dtype=int))
    write_transfer_tasks(np.random.default_rng(1), [lang], grammar, 30, tmp_path)
    sentences = read_conllu(tmp_path / "udpos" / "xa" / "train.conllu")
    seen = {tuple(w.form for w in s): [(w.head, w.deprel) for w in s] for s in sentences}
    assert seen == trees  # every shape drawn in 30 sentences, each with its hand-written tree


def test_parsed_corpora_are_the_corpora_with_their_trees(world_dir, tmp_path):
    from distalign.synthetic_languages.syntax_transform import read_conllu

    parsed = generate_world(dataclasses.replace(CFG, parsed_corpora=True), tmp_path, seed=0)
    for lang, path in parsed.corpora.items():
        assert path.read_bytes() == (world_dir / path.name).read_bytes()  # the same draws
        trees = read_conllu(parsed.parsed_corpora[lang])  # checked as dependency trees by the reader
        assert [" ".join(w.form for w in t) for t in trees] == path.read_text().splitlines()
        for tree in trees:
            verb = [w.index for w in tree if w.upos == "VERB"]
            assert [(w.head, w.deprel) for w in tree if w.upos == "VERB"] == [(0, "root")]
            assert sorted(w.deprel for w in tree if w.upos == "NOUN") == ["nsubj", "obj"]
            assert all(w.head == verb[0] for w in tree if w.upos == "NOUN")
            assert all(
                w.deprel == "amod" and tree[w.head - 1].upos == "NOUN" and abs(w.head - w.index) == 1
                for w in tree
                if w.upos == "ADJ"
            )
    assert not (world_dir / "corpus.xa.conllu").exists()  # only when asked for
