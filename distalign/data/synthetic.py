"""A small synthetic multilingual world, so the quickstart runs with no external data.

Languages descend from one proto-language: every concept has a proto word, and each language
applies its own sound changes (consonant shifts) and suffix, so translations share some subwords
the way cognates do. Sentences are drawn per topic from shared concepts and realised in each
language's own word order (SVO, SOV, VSO, adjective before or after the noun). Corpora are
independent samples per language, not translations of each other.

``generate_world`` writes the files the real readers consume:
``corpus.<lang>.txt`` (with ``parsed_corpora`` also ``corpus.<lang>.conllu``: the same sentences with the trees the
grammar built them by), ``constraints.parquet`` (training concepts only) and
``eval.<l1>-<l2>.tsv`` (G-BLI format, held-out concepts only); with ``transfer_examples`` also labelled
data for ``distalign transfer`` under ``transfer/`` (``write_transfer_tasks``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from distalign.data.constraint_schema import CONSTRAINT_SCHEMA
from distalign.data.sources import DictionarySource
from distalign.languages import LanguageCode

CONSONANTS = list("ptkbdgmnlrsvfz")
VOWELS = list("aeiou")
WORD_ORDERS = ["SVO", "SOV", "VSO", "OVS"]
NUM_TOPICS = 8
TRANSFER_DIR = "transfer"  # <world>/transfer/<task>/<lang>/
TRANSFER_TASK_NAMES = ("udpos", "pawsx")  # what write_transfer_tasks writes there
TRANSFER_STREAM = 24  # the transfer tasks' RNG: default_rng([seed, TRANSFER_STREAM])
UPOS_OF_CLASS = {"N": "NOUN", "V": "VERB", "A": "ADJ"}  # the grammar has no function words
# a word of a sentence: its form, class (N, V, A), head (1-based position, 0 for the root) and UD relation
Token = tuple[str, str, int, str]


@dataclass(kw_only=True)
class SyntheticConfig:
    """A small synthetic multilingual world: shared concepts, related vocabularies, own word orders."""

    # x + a letter: invented
    languages: list[LanguageCode] = field(default_factory=lambda: [LanguageCode(c) for c in ("xa", "xb", "xc")])
    num_concepts: int = 300  # shared meanings: each language has a word for each
    sentences_per_language: int = 1500  # corpus size of each language
    synonym_rate: float = 0.2  # share of concepts with a second word (monolingual synonyms)
    heldout_fraction: float = 0.2  # concepts held out of the constraints for BLI evaluation
    validation_sentences: int = 0  # per language, drawn after the corpus: held-out sentences for the MLM loss
    # per language and split (train, dev, test) of each transfer task (udpos, pawsx); 0 = none written
    transfer_examples: int = 0
    # also write each corpus as CoNLL-U with its dependency trees (the bench's translit_syn re-orders by them)
    parsed_corpora: bool = False


@dataclass
class SyntheticWorld:
    languages: list[str]
    corpora: dict[str, Path]
    parsed_corpora: dict[str, Path]  # files exist when generated with parsed_corpora
    validation_corpora: dict[str, Path]  # files exist when generated with validation_sentences > 0
    constraints: Path
    eval_dictionaries: list[DictionarySource]
    transfer_tasks: Path  # distalign transfer's --data-dir; written when generated with transfer_examples > 0


def world_in(directory: str | Path, languages: list[str]) -> SyntheticWorld:
    """The files of a world of ``languages`` written to ``directory`` by ``generate_world``."""
    out = Path(directory)
    eval_dicts = [
        DictionarySource(path=str(out / f"eval.{l1}-{l2}.tsv"), lang1=LanguageCode(l1), lang2=LanguageCode(l2))
        for l1, l2 in itertools.combinations(languages, 2)
    ]
    return SyntheticWorld(
        list(languages),
        {lang: out / f"corpus.{lang}.txt" for lang in languages},
        {lang: out / f"corpus.{lang}.conllu" for lang in languages},
        {lang: out / f"validation.{lang}.txt" for lang in languages},
        out / "constraints.parquet",
        eval_dicts,
        out / TRANSFER_DIR,
    )


def _proto_word(rng: np.random.Generator) -> str:
    syllables = rng.integers(2, 4)
    return "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS) for _ in range(syllables))


def _sound_changes(rng: np.random.Generator) -> dict[str, str]:
    shifted = rng.choice(CONSONANTS, size=4, replace=False)
    targets = rng.permutation(shifted)
    return dict(zip(shifted.tolist(), targets.tolist()))


class _Language:
    def __init__(self, name: str, rng: np.random.Generator):
        self.name = name
        self.changes = _sound_changes(rng)
        self.suffix = rng.choice(VOWELS) + rng.choice(["n", "s", "r", ""])
        self.order = WORD_ORDERS[int(rng.integers(len(WORD_ORDERS)))]
        self.adjective_first = bool(rng.integers(2))

    def realise(self, proto: str) -> str:
        return "".join(self.changes.get(ch, ch) for ch in proto) + self.suffix


@dataclass
class _Grammar:
    lexicon: dict[str, list[list[str]]]  # language -> concept -> its words
    word_class: np.ndarray  # per concept: N, V or A
    topic: np.ndarray  # per concept

    def sentence(self, rng, lang: _Language, t: int | None = None) -> list[Token]:
        return _tagged_sentence(rng, lang, self.lexicon[lang.name], self.word_class, self.topic, t)

    def text(self, rng, lang: _Language, t: int | None = None) -> str:
        return " ".join(w for w, *_ in self.sentence(rng, lang, t))


def conllu_block(tokens: list[Token], comments: list[str]) -> str:
    """One CoNLL-U sentence: the comment lines, then a row per token (form, UPOS, head, relation)."""
    rows = [
        f"{i}\t{w}\t_\t{UPOS_OF_CLASS[k]}\t_\t_\t{head}\t{rel}\t_\t_" for i, (w, k, head, rel) in enumerate(tokens, 1)
    ]
    return "".join(f"# {c}\n" for c in comments) + "\n".join(rows) + "\n"


def _unique_protos(rng: np.random.Generator, count: int) -> list[str]:
    seen: set[str] = set()
    words: list[str] = []
    while len(words) < count:
        w = _proto_word(rng)
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def generate_world(cfg: SyntheticConfig, out_dir: str | Path, seed: int = 0) -> SyntheticWorld:
    rng = np.random.default_rng(seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    n = cfg.num_concepts
    languages = [_Language(name, rng) for name in cfg.languages]

    # Each concept: one or two proto forms (the second is a synonym), a topic and a word class.
    has_synonym = rng.random(n) < cfg.synonym_rate
    protos = _unique_protos(rng, n + int(has_synonym.sum()))
    forms: list[list[str]] = []
    extra = iter(protos[n:])
    for c in range(n):
        forms.append([protos[c]] + ([next(extra)] if has_synonym[c] else []))
    # Realised words per language; sound changes can merge two protos, so dedupe per language.
    lexicon: dict[str, list[list[str]]] = {}
    for lang in languages:
        used: set[str] = set()
        words_by_concept = []
        for c in range(n):
            words = []
            for proto in forms[c]:
                w = lang.realise(proto)
                while w in used:
                    w = w + rng.choice(VOWELS)
                used.add(w)
                words.append(w)
            words_by_concept.append(words)
        lexicon[lang.name] = words_by_concept

    word_class = rng.choice(np.array(["N", "V", "A"]), size=n, p=[0.55, 0.25, 0.2])
    topic = rng.integers(NUM_TOPICS, size=n)
    heldout = rng.random(n) < cfg.heldout_fraction

    world = world_in(out, [lang.name for lang in languages])
    grammar = _Grammar(lexicon, word_class, topic)
    for lang in languages:
        sentences = [grammar.sentence(rng, lang) for _ in range(cfg.sentences_per_language)]
        world.corpora[lang.name].write_text("\n".join(" ".join(w for w, *_ in s) for s in sentences) + "\n")
        if cfg.parsed_corpora:
            world.parsed_corpora[lang.name].write_text(
                "\n".join(conllu_block(s, [f"text = {' '.join(w for w, *_ in s)}"]) for s in sentences) + "\n",
                encoding="utf-8",
            )
    for lang in languages:  # after every corpus: the corpora do not change with validation_sentences
        if cfg.validation_sentences:
            texts = [grammar.text(rng, lang) for _ in range(cfg.validation_sentences)]
            world.validation_corpora[lang.name].write_text("\n".join(texts) + "\n")

    pq.write_table(_constraint_table(lexicon, world.languages, ~heldout, topic), world.constraints)
    for source in world.eval_dictionaries:
        lines = [f"{lexicon[source.lang1][c][0]}\t{lexicon[source.lang2][c][0]}" for c in np.flatnonzero(heldout)]
        Path(source.path).write_text("\n".join(lines) + "\n")
    if cfg.transfer_examples:
        # an RNG of its own: the corpora, constraints and dictionaries do not change with transfer_examples
        write_transfer_tasks(
            np.random.default_rng([seed, TRANSFER_STREAM]),
            languages,
            grammar,
            cfg.transfer_examples,
            world.transfer_tasks,
        )
    return world


def write_transfer_tasks(rng, languages: list[_Language], grammar: _Grammar, count: int, out: Path) -> None:
    """``count`` examples per language and split of two tasks, in the files ``distalign transfer`` reads:

    - ``udpos/<lang>/{train,dev,test}.conllu``: each word's class from the grammar as its UPOS tag, and its
      head and relation from the grammar's tree;
    - ``pawsx/<lang>/{train,dev,test}.tsv`` (sentence1, sentence2, label): label 1 when both sentences are
      drawn from the same topic, else 0 (each concept has one topic, so the words tell topics apart; the
      quickstart's tiny model still barely learns it, see docs/benchmarks.md); exactly half of each split is 1 (an odd
      count: one more 0).
    """
    for lang in languages:
        for split in ("train", "dev", "test"):
            pos = out / "udpos" / lang.name
            pos.mkdir(parents=True, exist_ok=True)
            blocks = []
            for i in range(count):
                tagged = grammar.sentence(rng, lang)
                blocks.append(
                    conllu_block(
                        tagged, [f"sent_id = {lang.name}-{split}-{i}", f"text = {' '.join(w for w, *_ in tagged)}"]
                    )
                )
            (pos / f"{split}.conllu").write_text("\n".join(blocks) + "\n", encoding="utf-8")

            pair = out / "pawsx" / lang.name
            pair.mkdir(parents=True, exist_ok=True)
            lines = ["sentence1\tsentence2\tlabel"]
            for label in rng.permutation(np.arange(count) % 2):
                first = int(rng.integers(NUM_TOPICS))
                # a different topic: a uniform draw among the other NUM_TOPICS - 1
                second = first if label else (first + 1 + int(rng.integers(NUM_TOPICS - 1))) % NUM_TOPICS
                a, b = grammar.text(rng, lang, first), grammar.text(rng, lang, second)
                lines.append(f"{a}\t{b}\t{label}")
            (pair / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _pick(rng, candidates: np.ndarray) -> int:
    # Zipf-like preference inside a topic: low-index concepts are more frequent.
    weights = 1.0 / np.arange(1, len(candidates) + 1)
    return int(candidates[rng.choice(len(candidates), p=weights / weights.sum())])


def _tagged_sentence(rng, lang: _Language, words, word_class, topic, t: int | None = None) -> list[Token]:
    """The tokens of one sentence about topic ``t`` (drawn when None): the verb is the root, the subject's and the
    object's nouns depend on it (nsubj, obj), an adjective on its noun (amod)."""
    if t is None:
        t = rng.integers(NUM_TOPICS)
    in_topic = topic == t
    pools = {k: np.flatnonzero(in_topic & (word_class == k)) for k in "NVA"}
    pools = {k: v if len(v) else np.flatnonzero(word_class == k) for k, v in pools.items()}

    def word(k: str) -> tuple[str, str]:
        forms = words[_pick(rng, pools[k])]
        return forms[int(rng.integers(len(forms)))], k

    def noun_phrase() -> list[tuple[str, str]]:
        if rng.random() < 0.4:
            adj, noun = word("A"), word("N")
            return [adj, noun] if lang.adjective_first else [noun, adj]
        return [word("N")]

    parts = {"S": noun_phrase(), "V": [word("V")], "O": noun_phrase()}
    placed = [(w, k, role) for role in lang.order for w, k in parts[role]]
    head_of = {(role, k): i for i, (_, k, role) in enumerate(placed, 1) if k in "NV"}  # one noun per phrase
    relation = {"S": "nsubj", "O": "obj"}
    return [
        (w, k, 0, "root")
        if k == "V"
        else (w, k, head_of["V", "V"], relation[role])
        if k == "N"
        else (w, k, head_of[role, "N"], "amod")
        for w, k, role in placed
    ]


def _gloss(lexicon, lang: str, concept: int, topic: np.ndarray) -> str:
    """A definition-like gloss: the words (in ``lang``) of up to three other concepts of the same topic."""
    neighbours = [k for k in np.flatnonzero(topic == topic[concept]) if k != concept][:3]
    return " ".join(lexicon[lang][k][0] for k in neighbours)


def _constraint_table(lexicon, languages: list[str], train_concepts: np.ndarray, topic: np.ndarray) -> pa.Table:
    """All mono- and cross-lingual synonym pairs of the training concepts (BabelBERT §3.1 style), with glosses."""
    rows: dict[str, list] = {name: [] for name in CONSTRAINT_SCHEMA.names}
    for c in np.flatnonzero(train_concepts).tolist():
        items = [(w, lang) for lang in languages for w in lexicon[lang][c]]
        for (w1, l1), (w2, l2) in itertools.combinations(items, 2):
            values = (w1, l1, w2, l2, f"c{c}", _gloss(lexicon, l1, c, topic), _gloss(lexicon, l2, c, topic))
            for key, value in zip(CONSTRAINT_SCHEMA.names, values):
                rows[key].append(value)
    return pa.table(rows, schema=CONSTRAINT_SCHEMA)
