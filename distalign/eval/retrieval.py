"""Tatoeba-style parallel sentence retrieval accuracy (cosine nearest neighbour)."""

from __future__ import annotations

import torch

from distalign.eval.alignment import aligned_nn_hits
from distalign.similarity import CHUNK_SIZE

__all__ = ["tatoeba_accuracy", "tatoeba_accuracy_both_directions"]


def tatoeba_accuracy(queries: torch.Tensor, candidates: torch.Tensor, *, chunk_size: int = CHUNK_SIZE) -> float:
    """Fraction in [0, 1] of queries whose cosine nearest candidate is the aligned one.

    queries[i] and candidates[i] are translations (same shape, else ValueError).
    Ties count as correct only if the aligned candidate is among the maxima.
    """
    return aligned_nn_hits(queries, candidates, chunk_size=chunk_size).double().mean().item()


def tatoeba_accuracy_both_directions(
    a: torch.Tensor, b: torch.Tensor, *, chunk_size: int = CHUNK_SIZE
) -> tuple[float, float]:
    """(accuracy a -> b, accuracy b -> a)."""
    return tatoeba_accuracy(a, b, chunk_size=chunk_size), tatoeba_accuracy(b, a, chunk_size=chunk_size)
