"""Evaluation tasks as data: what to encode (``text_sets``) and how to score one layer (``score``).

Keeping the two apart lets one runner encode each distinct text set once (a 100K-word vocabulary
shared by several BLI pairs), cache it per checkpoint, and score task x pair x layer separately,
in-process (:func:`evaluate_locally`) or as Ray tasks (``distalign.eval.distributed``).

Result rows are ``{task, pair, layer, metric, value}``; layer 0 is the embedding output, layer L
the last encoder layer.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

import numpy as np
import torch

from distalign.eval.alignment import alignment_score
from distalign.eval.bli import gold_ranks, ranking_metrics
from distalign.eval.encoders import EncodingCache, sentence_vectors, word_vectors
from distalign.eval.retrieval import tatoeba_accuracy_both_directions
from distalign.eval.xlsim import word_similarity_spearman

WORDS, SENTENCES = "words", "sentences"


@dataclass
class TextSet:
    """Texts of one language to encode together: words alone (``[CLS] w [SEP]``) or sentences."""

    kind: str
    lang: str
    texts: list[str]

    @cached_property
    def key(self) -> str:
        """Identifies the set across tasks (same words of the same language = one encoding)."""
        digest = hashlib.sha256(json.dumps(self.texts, ensure_ascii=False).encode()).hexdigest()[:16]
        return f"{self.kind}:{self.lang}:{digest}"


def _distinct(words: list[str]) -> tuple[list[str], list[int]]:
    """Distinct words in first-seen order, and each input word's index among them."""
    distinct = list(dict.fromkeys(words))
    position = {w: i for i, w in enumerate(distinct)}
    return distinct, [position[w] for w in words]


class EvalTask:
    """One task on one language pair: the text sets it encodes, how one layer is read from their stacks
    of vectors, and its metrics from those vectors."""

    task: str  # the name in result rows and in MLflow (eval/<task>/<pair>/<metric>)

    @property
    def pair(self) -> str:
        raise NotImplementedError

    def text_sets(self) -> dict[str, TextSet]:
        raise NotImplementedError

    def at_layer(self, stack, layer: int):
        """The vectors scored as ``layer`` from a role's ``[L+1, n, d]`` stack; None: not scored there."""
        return stack[layer]

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        raise NotImplementedError


BLIRanking = Literal["grouped", "per_pair"]


@dataclass
class BLITask(EvalTask):
    """Bilingual lexicon induction lang1 -> lang2: rank ``vocab`` for every query (see :meth:`from_pairs`).

    ``grouped``: one query per source word, its best-ranked gold translation counts. ``per_pair``
    (BabelBERT's evaluation): one query per test pair, the pair's own target is the gold and the
    word's other translations compete with it. ``source_vocab`` is the source space the queries come
    from: CSLS's r_S is computed over it, and per-pair queries outside it are dropped (``oov_source``).
    """

    lang1: str
    lang2: str
    queries: list[str]
    vocab: list[str]
    gold: list[list[int]]  # gold[i] = indices into vocab of the translations of queries[i]
    oov: int = 0  # queries whose translations are all outside the vocabulary (not scored)
    similarity: str = "cosine"
    k_values: tuple[int, ...] = (1, 5, 10)
    csls_k: int = 10
    source_vocab: list[str] | None = None
    ranking: BLIRanking = "grouped"
    oov_source: int = 0  # per_pair: test pairs whose source word is outside source_vocab (not scored)

    @property
    def task(self) -> str:
        return "bli" if self.similarity == "cosine" else f"bli_{self.similarity}"

    @property
    def pair(self) -> str:
        return f"{self.lang1}-{self.lang2}"

    @classmethod
    def from_pairs(cls, lang1: str, lang2: str, pairs: list[tuple[str, str]], vocab_words: list[str] | None = None,
                   *, lowercase: bool = True, source_vocab: list[str] | None = None,
                   ranking: BLIRanking = "grouped", **options) -> "BLITask":
        """Queries from test pairs; the target vocabulary is ``vocab_words`` (never extended with gold
        words: a query whose translations are all missing is OOV, counted and skipped) or, when None,
        the distinct targets of the pairs. ``lowercase`` applies to the vocabularies and to looking words
        up in them (the shared vocabularies are lower-case while G-BLI keeps German noun capitals); a query
        is encoded as written, as the BabelBERT authors' evaluation does (a cased model sees "Haus")."""
        norm = str.lower if lowercase else str
        vocab = list(dict.fromkeys(norm(w) for w in (vocab_words if vocab_words is not None else
                                                     [t for _, t in pairs])))
        position = {w: i for i, w in enumerate(vocab)}
        sources = None if source_vocab is None else list(dict.fromkeys(norm(w) for w in source_vocab))
        if ranking == "per_pair":
            known = set(sources) if sources is not None else None
            in_space = [(a, norm(b)) for a, b in pairs if known is None or norm(a) in known]
            scored = [(a, position[b]) for a, b in in_space if b in position]
            return cls(lang1, lang2, [a for a, _ in scored], vocab, [[g] for _, g in scored],
                       oov=len(in_space) - len(scored), source_vocab=sources, ranking=ranking,
                       oov_source=len(pairs) - len(in_space), **options)
        translations: dict[str, set[int]] = {}
        written: dict[str, str] = {}  # a source word's first written form: its query
        for src, tgt in pairs:
            gold = translations.setdefault(norm(src), set())
            written.setdefault(norm(src), src)
            if norm(tgt) in position:
                gold.add(position[norm(tgt)])
        keys = [key for key, gold in translations.items() if gold]
        return cls(lang1, lang2, [written[key] for key in keys], vocab, [sorted(translations[key]) for key in keys],
                   oov=len(translations) - len(keys), source_vocab=sources, **options)

    def text_sets(self) -> dict[str, TextSet]:
        if not self.queries:  # all OOV: nothing to encode, score() reports NaN and the OOV count
            return {}
        return {"src": TextSet(WORDS, self.lang1, self._source_words()[0]),
                "tgt": TextSet(WORDS, self.lang2, self.vocab)}

    def _source_words(self) -> tuple[list[str], list[int]]:
        """The encoded source words (the source space) and each query's row among them."""
        if self.source_vocab is None:
            return _distinct(self.queries)
        row = {w: i for i, w in enumerate(self.source_vocab)}
        extra = [q for q in dict.fromkeys(self.queries) if q not in row]  # grouped queries outside the space
        words = self.source_vocab + extra
        row.update({w: len(self.source_vocab) + i for i, w in enumerate(extra)})
        return words, [row[q] for q in self.queries]

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        counts = {"oov": self.oov, **({"oov_source": self.oov_source} if self.ranking == "per_pair" else {})}
        if not self.queries:
            return {"mrr": math.nan, **{f"p_at_{k}": math.nan for k in self.k_values}, **counts}
        _, rows = self._source_words()
        # CSLS's r_S over the source vocabulary, not the queries encoded beside it
        space = vectors["src"] if self.source_vocab is None else vectors["src"][: len(self.source_vocab)]
        ranks = gold_ranks(vectors["src"][rows], vectors["tgt"], self.gold, self.similarity, self.csls_k,
                           src_space=space)
        metrics = ranking_metrics(ranks, self.k_values)
        return {"mrr": metrics.pop("mrr"), **{f"p_at_{k}": v for k, v in metrics.items()}, **counts}


@dataclass
class XLSimTask(EvalTask):
    """Cross-lingual word similarity: Spearman's rho between cosine and human scores (Multi-SimLex)."""

    lang1: str
    lang2: str
    rows: list[tuple[str, str, float]]
    task: str = field(default="xlsim", init=False)

    @property
    def pair(self) -> str:
        return f"{self.lang1}-{self.lang2}"

    def text_sets(self) -> dict[str, TextSet]:
        return {"w1": TextSet(WORDS, self.lang1, _distinct([r[0] for r in self.rows])[0]),
                "w2": TextSet(WORDS, self.lang2, _distinct([r[1] for r in self.rows])[0])}

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        index1 = _distinct([r[0] for r in self.rows])[1]
        index2 = _distinct([r[1] for r in self.rows])[1]
        return {"spearman": word_similarity_spearman(vectors["w1"][index1], vectors["w2"][index2],
                                                     [r[2] for r in self.rows])}


@dataclass
class TatoebaTask(EvalTask):
    """Sentence retrieval between ``lang`` and English, both directions; accuracy in [0, 1].

    ``acc`` (the headline) is xxx->eng, as XTREME scores it and DICT-MLM and the static-contextual
    paper report it; ``acc_to_eng`` repeats it under its direction's name and ``acc_from_eng`` is
    eng->xxx (BabelBERT's ``evaluate.py``). ``mean_of_layers`` = n scores the sentence vectors at layer l
    as the mean of layers l-n+1..l (n = 4 at the last layer: DICT-MLM's mean of the last four layers);
    layers with fewer than n below them are not scored.
    """

    lang: str
    sentences: list[str]
    english: list[str]
    mean_of_layers: int = 1
    task: str = field(default="tatoeba", init=False)

    @property
    def pair(self) -> str:
        return f"{self.lang}-eng"

    def text_sets(self) -> dict[str, TextSet]:
        return {"src": TextSet(SENTENCES, self.lang, self.sentences), "eng": TextSet(SENTENCES, "eng", self.english)}

    def at_layer(self, stack, layer: int):
        if layer + 1 < self.mean_of_layers:
            return None
        return stack[layer + 1 - self.mean_of_layers: layer + 1].mean(0)

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        to_eng, from_eng = tatoeba_accuracy_both_directions(vectors["src"], vectors["eng"])
        return {"acc_to_eng": to_eng, "acc_from_eng": from_eng, "acc": to_eng}


@dataclass
class WordAlignmentTask(EvalTask):
    """Contextual word alignment (0-100) at every layer: word i's cosine-nearest among the evaluated
    pairs' targets is its translation (chance 1/n). A per-layer variant of ALIGN-MLM's score, which is
    ``distalign.eval.alignment.vocabulary_alignment`` (embedding rows, whole vocabularies)."""

    lang1: str
    lang2: str
    pairs: list[tuple[str, str]]
    task: str = field(default="word_alignment", init=False)

    @property
    def pair(self) -> str:
        return f"{self.lang1}-{self.lang2}"

    def text_sets(self) -> dict[str, TextSet]:
        return {"src": TextSet(WORDS, self.lang1, _distinct([p[0] for p in self.pairs])[0]),
                "tgt": TextSet(WORDS, self.lang2, _distinct([p[1] for p in self.pairs])[0])}

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        src = vectors["src"][_distinct([p[0] for p in self.pairs])[1]]
        tgt = vectors["tgt"][_distinct([p[1] for p in self.pairs])[1]]
        return {"score": alignment_score(src, tgt)}


@dataclass(frozen=True)
class EncodingSettings:
    max_word_tokens: int = 16
    max_sentence_length: int = 128
    word_batch_size: int = 256
    sentence_batch_size: int = 64


def encode_text_set(model, tokenizer, text_set: TextSet, settings: EncodingSettings = EncodingSettings(),
                    cache: EncodingCache | None = None) -> torch.Tensor:
    """``[L+1, n, d]`` float32 vectors of a text set at every layer (through ``cache`` when given)."""
    if text_set.kind == WORDS:
        return word_vectors(model, tokenizer, text_set.texts, text_set.lang, cache,
                            settings.max_word_tokens, settings.word_batch_size)
    return sentence_vectors(model, tokenizer, text_set.texts, text_set.lang, cache,
                            settings.max_sentence_length, settings.sentence_batch_size)


def score_layer(task: EvalTask, stacks: dict, layer: int) -> list[dict]:
    """Result rows of one task at one layer, from its text sets' ``[L+1, n, d]`` stacks (tensors or arrays)."""
    vectors = {role: task.at_layer(stack, layer) for role, stack in stacks.items()}
    if any(v is None for v in vectors.values()):
        return []
    # a copy: torch wants writable memory, and a Ray object-store array is read-only
    vectors = {role: torch.as_tensor(np.array(v)) if isinstance(v, np.ndarray) else v for role, v in vectors.items()}
    return [{"task": task.task, "pair": task.pair, "layer": layer, "metric": metric, "value": float(value)}
            for metric, value in task.score(vectors).items()]


def evaluate_locally(model, tokenizer, tasks: list[EvalTask], layers: list[int] | None = None,
                     settings: EncodingSettings = EncodingSettings(),
                     cache: EncodingCache | None = None) -> list[dict]:
    """Every task at every layer (or the given ones; negative counts from the last), in this process."""
    num_layers = model.masked_lm.config.num_hidden_layers + 1
    encoded: dict[str, torch.Tensor] = {}
    rows: list[dict] = []
    for task in tasks:
        sets = task.text_sets()
        for text_set in sets.values():
            if text_set.key not in encoded:
                encoded[text_set.key] = encode_text_set(model, tokenizer, text_set, settings, cache)
        for layer in layers if layers is not None else range(num_layers):
            layer = layer % num_layers
            rows += score_layer(task, {role: encoded[ts.key] for role, ts in sets.items()}, layer)
    return rows
