"""Contextual word alignment of the BLI test pairs (a per-layer variant of ALIGN-MLM's alignment score)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from distalign.eval.tasks.base import WordPairTask
from distalign.eval.tasks.bli import bli_sources, limit_queries, validate_languages

if TYPE_CHECKING:
    import torch

    from distalign.eval.suite_spec import SuiteSpec


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
class WordAlignmentTask(WordPairTask):
    """Contextual word alignment (0-100) at every layer: word i's cosine-nearest among the evaluated
    pairs' targets is its translation (chance 1/n). A per-layer variant of ALIGN-MLM's score, which is
    ``distalign.eval.alignment.vocabulary_alignment`` (embedding rows, whole vocabularies)."""

    pairs: list[tuple[str, str]]
    name: ClassVar[str] = "word_alignment"
    task: ClassVar[str] = "word_alignment"
    main_metric: ClassVar[str] = "score"

    @classmethod
    def validate(cls, suite: SuiteSpec) -> None:
        validate_languages(suite)

    @classmethod
    def from_suite(cls, suite: SuiteSpec) -> list[WordAlignmentTask]:
        """One task per BLI test dictionary (``bli_pairs``, ``dictionaries``, ``max_queries``), one-to-one pairs."""
        return [
            cls(lang1, lang2, one_to_one(limit_queries(pairs, suite.max_queries)))
            for lang1, lang2, pairs in bli_sources(suite)
        ]

    def word_pairs(self) -> list[tuple[str, str]]:
        return self.pairs

    def score(self, vectors: dict[str, torch.Tensor]) -> dict[str, float]:
        # here, not at the top: the task modules import no torch, so the command line's help loads fast
        from distalign.eval.alignment import alignment_score

        return {"score": alignment_score(*self.paired_vectors(vectors))}
