"""Contextual word alignment of the BLI test pairs (a per-layer variant of ALIGN-MLM's alignment score)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

from distalign.eval.alignment import alignment_score
from distalign.eval.tasks.base import WORDS, EvalTask, TextSet, distinct
from distalign.eval.tasks.bli import bli_sources, limit_queries

if TYPE_CHECKING:
    from distalign.eval.suite import SuiteSpec


def one_to_one(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Keep a pair only if neither word was used by an earlier pair (the alignment score needs row i = row i)."""
    seen_src, seen_tgt, kept = set(), set(), []
    for s, t in pairs:
        if s not in seen_src and t not in seen_tgt:
            seen_src.add(s)
            seen_tgt.add(t)
            kept.append((s, t))
    return kept


@dataclass
class WordAlignmentTask(EvalTask):
    """Contextual word alignment (0-100) at every layer: word i's cosine-nearest among the evaluated
    pairs' targets is its translation (chance 1/n). A per-layer variant of ALIGN-MLM's score, which is
    ``distalign.eval.alignment.vocabulary_alignment`` (embedding rows, whole vocabularies)."""

    lang1: str
    lang2: str
    pairs: list[tuple[str, str]]
    name: ClassVar[str] = "word_alignment"
    task: ClassVar[str] = "word_alignment"
    main_metric: ClassVar[str] = "score"

    @classmethod
    def from_suite(cls, suite: SuiteSpec) -> list[WordAlignmentTask]:
        """One task per BLI test dictionary (``bli_pairs``, ``dictionaries``, ``max_queries``), one-to-one pairs."""
        return [cls(lang1, lang2, one_to_one(limit_queries(pairs, suite.max_queries)))
                for lang1, lang2, pairs in bli_sources(suite)]

    @property
    def pair(self) -> str:
        return f"{self.lang1}-{self.lang2}"

    def text_sets(self) -> dict[str, TextSet]:
        return {"src": TextSet(WORDS, self.lang1, distinct([p[0] for p in self.pairs])[0]),
                "tgt": TextSet(WORDS, self.lang2, distinct([p[1] for p in self.pairs])[0])}

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        src = vectors["src"][distinct([p[0] for p in self.pairs])[1]]
        tgt = vectors["tgt"][distinct([p[1] for p in self.pairs])[1]]
        return {"score": alignment_score(src, tgt)}
