"""Collectives over the training ranks that objectives need (no-ops without a process group)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def all_gather_rows(rows: torch.Tensor, with_grad: bool = False) -> torch.Tensor:
    """Concatenate ``rows`` [n_rank, ...] from all ranks in rank order (n may differ between ranks).

    ``with_grad``: the result keeps the autograd graph; in backward each rank's rows receive the sum
    over ranks of the gradients of their copies (so a loss every rank computes alike on the gathered
    rows, with DDP's gradient averaging, trains as that loss would on one worker). Without an
    initialised process group (or with one rank) ``rows`` is returned unchanged.
    """
    if not _distributed():
        return rows
    world = dist.get_world_size()
    size = torch.tensor([rows.shape[0]], device=rows.device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    dist.all_gather(sizes, size)
    longest = int(max(sizes))
    padded = torch.cat([rows, rows.new_zeros((longest - rows.shape[0], *rows.shape[1:]))])
    if with_grad:
        gathered = dist_fn.all_gather(padded)
    else:
        gathered = [torch.empty_like(padded) for _ in range(world)]
        dist.all_gather(gathered, padded)
    return torch.cat([part[: int(n)] for part, n in zip(gathered, sizes)])
