"""Collectives over the training ranks that objectives need (no-ops without a process group)."""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def all_gather_rows(rows: torch.Tensor, with_grad: bool = False, same_size: bool = False) -> torch.Tensor:
    """Concatenate ``rows`` [n_rank, ...] from all ranks in rank order (n may differ between ranks; with
    ``same_size`` the caller vouches that it does not, which saves a collective and a host sync).

    ``with_grad``: the result keeps the autograd graph; in backward each rank's rows receive the sum
    over ranks of the gradients of their copies (so a loss every rank computes alike on the gathered
    rows, with DDP's gradient averaging, trains as that loss would on one worker). Without an
    initialised process group (or with one rank) ``rows`` is returned unchanged.
    """
    if not _distributed():
        return rows
    world = dist.get_world_size()
    if same_size:
        gathered = dist_fn.all_gather(rows) if with_grad else _gathered(rows, world)
        return torch.cat(gathered)
    size = torch.tensor([rows.shape[0]], device=rows.device)
    sizes = _gathered(size, world)
    longest = int(max(sizes))
    padded = torch.cat([rows, rows.new_zeros((longest - rows.shape[0], *rows.shape[1:]))])
    gathered = dist_fn.all_gather(padded) if with_grad else _gathered(padded, world)
    return torch.cat([part[: int(n)] for part, n in zip(gathered, sizes)])


def _gathered(tensor: torch.Tensor, world: int) -> list[torch.Tensor]:
    parts = [torch.empty_like(tensor) for _ in range(world)]
    dist.all_gather(parts, tensor)
    return parts
