"""Embedding alignment score: how often a row's cosine nearest neighbour is its translation."""

from __future__ import annotations

import torch

from distalign.similarity import CHUNK_SIZE, check_chunk_size, normalized_pair

__all__ = ["aligned_nn_hits", "alignment_score", "vocabulary_alignment"]


def aligned_nn_hits(queries: torch.Tensor, candidates: torch.Tensor, *, chunk_size: int = CHUNK_SIZE) -> torch.Tensor:
    """BoolTensor [n]: hit_i = cos(q_i, c_i) >= max_j cos(q_i, c_j).

    Rows i of ``queries`` and ``candidates`` are aligned pairs (same shape, else
    ValueError). Ties in the argmax count as a hit only when i is among the maximal
    candidates. Query rows are scored ``chunk_size`` at a time.
    """
    check_chunk_size(chunk_size)
    q, c = normalized_pair(queries, candidates, same_shape=True)
    hits = []
    for start in range(0, q.shape[0], chunk_size):
        sims = q[start : start + chunk_size] @ c.T
        # Aligned score taken from the same matrix as the maximum, so exact ties compare equal.
        hits.append(sims.diagonal(offset=start) >= sims.amax(dim=1))
    return torch.cat(hits)


def alignment_score(e_src: torch.Tensor, e_tgt: torch.Tensor, *, chunk_size: int = CHUNK_SIZE) -> float:
    """100 * mean_i [argmax_j cos(e_src[i], e_tgt[j]) == i]; ties count as correct if i is among the maxima."""
    return 100.0 * aligned_nn_hits(e_src, e_tgt, chunk_size=chunk_size).double().mean().item()


def vocabulary_alignment(
    embeddings: torch.Tensor, src_ids, tgt_ids, candidate_ids, *, chunk_size: int = CHUNK_SIZE
) -> float:
    """ALIGN-MLM's alignment score (Tang et al. 2022 §4, after Deshpande et al. 2021), in %.

    A token of the natural language scores 100 if, by cosine of the input-embedding rows
    (``embeddings`` [V, d]), its counterpart in the derived language is the nearest among the derived
    language's whole vocabulary (``candidate_ids``), else 0; the score is the mean over the natural
    language's tokens ``src_ids`` with counterparts ``tgt_ids``. Ties count for the counterpart.
    """
    # host-side: the ids are checked on the host; indexing moves them to the embeddings' device (own: below)
    src_ids, tgt_ids, candidate_ids = (torch.as_tensor(x, dtype=torch.long) for x in (src_ids, tgt_ids, candidate_ids))
    if src_ids.shape != tgt_ids.shape or not len(src_ids):
        raise ValueError(f"src_ids and tgt_ids must be equal non-empty lists, got {len(src_ids)} and {len(tgt_ids)}")
    position = {int(c): i for i, c in enumerate(candidate_ids)}
    missing = [int(t) for t in tgt_ids if int(t) not in position]
    if missing:
        raise ValueError(f"counterparts {missing[:5]} are not among the candidate ids (the derived vocabulary)")
    check_chunk_size(chunk_size)
    rows, candidates = normalized_pair(embeddings[src_ids], embeddings[candidate_ids])
    own = torch.tensor([position[int(t)] for t in tgt_ids], device=rows.device)
    hits = []
    for start in range(0, len(rows), chunk_size):
        sims = rows[start : start + chunk_size] @ candidates.T
        mine = sims.gather(1, own[start : start + chunk_size, None]).squeeze(1)
        hits.append(mine >= sims.amax(dim=1))
    return 100.0 * torch.cat(hits).double().mean().item()
