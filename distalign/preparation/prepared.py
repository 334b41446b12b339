"""What preparation hands to the run: the prepared inputs (``PreparedData``) and held-out dictionary pairs
(``BLIPairs``). A module of their own so that the steps that make them (``inputs``) and the ones that
transform or read them (``staging``, ``ray_streams``, ``schedule``, ``validation``) all import them downward."""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from distalign.data.corpus_stream import CorpusStream, count_rows
from distalign.data.readers import ReadReport
from distalign.preparation.cache import cached_json

log = logging.getLogger("distalign")
WORD_PAIR_COLUMNS = ("word1", "lang1", "word2", "lang2")  # of the constraint table: the run's training word pairs


@dataclass
class BLIPairs:
    """Held-out dictionary pairs of one language pair (never seen in training constraints)."""

    lang1: str
    lang2: str
    src: list[str]
    tgt: list[str]
    vocab: list[str] | None = None  # the targets to rank (eval.vocab_dir); None: the pairs' own targets


@dataclass(kw_only=True)
class PreparedData:
    model_path: str
    constraints: pa.Table  # the run's training word pairs (synset_index, row): the constraints stream's, DICT-MLM's
    corpus: CorpusStream
    eval_pairs: list[BLIPairs]  # validation pairs: in-loop BLI and model selection
    # each active table stream's rows by stream name (``Stream.prepare``, with ``row``): constraints, static, parallel
    tables: dict[str, pa.Table] = field(default_factory=dict)
    reports: list[ReadReport] = field(default_factory=list)
    excluded_constraints: int = 0
    validation: pa.Table | None = None  # text, lang, row, epoch: held-out sentences for the MLM validation loss
    test_pairs: list[BLIPairs] = field(default_factory=list)  # eval.test_languages' pairs, scored after training
    cache_dir: str = ""  # ``data.cache_dir``: where ``corpus_rows`` keeps its count for the next run on the same files

    @property
    def languages(self) -> list[str]:
        """Every language of the run; a language's id (DICT-MLM's language embeddings) is its index here: the
        corpus's, and those of the word pairs and of every table stream with a pair's two languages."""
        langs = {source.lang for source in self.corpus.sources}
        for table in (self.constraints, *self.tables.values()):
            if {"lang1", "lang2"} <= set(table.column_names):
                langs |= set(pc.unique(table["lang1"]).to_pylist()) | set(pc.unique(table["lang2"]).to_pylist())
        return sorted(langs)

    @property
    def word_pairs(self) -> pa.Table:
        """The training word pairs as (word1, lang1, word2, lang2): DICT-MLM's synonyms, sense-aware translations."""
        return self.constraints.select(list(WORD_PAIR_COLUMNS))

    @functools.cached_property
    def corpus_rows(self) -> int:
        """Sentences in the corpora as epoch 0 keeps them (only epoch-based schedules of corpus runs ask): counted
        before the run, so that ``train.epochs`` fixes the learning-rate schedule's length from the first step. An
        O(bytes) read, so spread over the cluster's CPUs when Ray is up (``count_rows``). Kept under ``cache_dir``
        by the sources' files, sizes, mtimes and sampling shares, so a restart or another trial on the same corpus
        reads nothing (a streamed Hugging Face dataset, which has no such key, is counted every time)."""

        def count() -> int:
            log.info("counting the corpus sentences (train.epochs / eval.every_epochs of a corpus-only run)")
            return count_rows(self.corpus)

        sources = self.corpus.sources
        if not self.cache_dir or any(not s.version for s in sources):
            return count()
        key = [(s.lang, s.kind, s.paths, s.text_field, s.keep, s.version) for s in sources]
        return cached_json(self.cache_dir, "corpus-rows", key, count)

    @property
    def malformed_rows(self) -> int:
        return sum(r.malformed for r in self.reports)
