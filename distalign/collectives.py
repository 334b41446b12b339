"""Every tensor collective distalign runs over its ranks goes through here (a test checks it).

A process group only takes tensors on the devices its backend serves: NCCL refuses CPU tensors ("No backend type
associated with device type cpu"), while gloo on CPU takes anything, so a CPU test never sees a tensor handed to
the wrong group. These helpers move a tensor to a device the group serves, run the collective, and hand the result
back on the caller's device. Without an initialised process group they are no-ops.

Object collectives (``all_gather_object``, ``broadcast_object_list``) and ``barrier`` pick their device
themselves (torch uses the current CUDA device under NCCL), so callers use ``torch.distributed`` directly for those.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_fn


def initialized() -> bool:
    return dist.is_available() and dist.is_initialized()


def distributed() -> bool:
    """A process group of more than one rank."""
    return initialized() and dist.get_world_size() > 1


def rank() -> int:
    """This process's rank in the default group (0 without one)."""
    return dist.get_rank() if initialized() else 0


def world_size() -> int:
    """The ranks of the default group (1 without one)."""
    return dist.get_world_size() if initialized() else 1


def collective_device(tensor_device: torch.device) -> torch.device:
    """A device the default group's backend takes tensors on: ``tensor_device`` where the backend serves its
    type, else the current CUDA device under NCCL, else CPU. Gloo counts as serving CPU only: it lacks some
    collectives on CUDA tensors."""
    backend = str(dist.get_backend()).lower()
    if ":" in backend:  # a device-to-backend map, e.g. "cpu:gloo,cuda:nccl"
        served = {entry.split(":")[0] for entry in backend.split(",")}
    else:
        served = {"cuda"} if backend == "nccl" else {"cpu"}
    if tensor_device.type in served:
        return tensor_device
    return torch.device("cuda", torch.cuda.current_device()) if "cuda" in served else torch.device("cpu")


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """The element-wise sum over ranks, on ``tensor``'s device (``tensor`` itself is left unchanged)."""
    if not initialized():
        return tensor
    reduced = tensor.to(collective_device(tensor.device), copy=True)
    dist.all_reduce(reduced)
    return reduced.to(tensor.device)


def broadcast_from_first(tensor: torch.Tensor) -> torch.Tensor:
    """Rank 0's ``tensor`` on every rank, on ``tensor``'s device (``tensor`` itself is left unchanged)."""
    if not initialized():
        return tensor
    shared = tensor.to(collective_device(tensor.device), copy=True)
    dist.broadcast(shared, src=0)
    return shared.to(tensor.device)


def all_gather_tensors(tensor: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's ``tensor`` (same shape on all ranks), in rank order, on ``tensor``'s device; no gradient."""
    if not distributed():
        return [tensor]
    sent = tensor.to(collective_device(tensor.device))
    parts = [torch.empty_like(sent) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, sent)
    return [part.to(tensor.device) for part in parts]


def all_gather_with_grad(tensor: torch.Tensor) -> list[torch.Tensor]:
    """As ``all_gather_tensors``, keeping the autograd graph: in backward each rank's ``tensor`` receives the sum
    over ranks of the gradients of its copies."""
    if not distributed():
        return [tensor]
    device = collective_device(tensor.device)
    return [part.to(tensor.device) for part in dist_fn.all_gather(tensor.to(device))]


def all_gather_rows(rows: torch.Tensor, with_grad: bool = False, same_size: bool = False) -> torch.Tensor:
    """Concatenate ``rows`` [n_rank, ...] from all ranks in rank order (n may differ between ranks; with
    ``same_size`` the caller vouches that it does not, which saves a collective and a host sync).

    ``with_grad``: the result keeps the autograd graph; in backward each rank's rows receive the sum
    over ranks of the gradients of their copies (so a loss every rank computes alike on the gathered
    rows, with DDP's gradient averaging, trains as that loss would on one worker). Without an
    initialised process group (or with one rank) ``rows`` is returned unchanged.
    """
    if not distributed():
        return rows
    gather = all_gather_with_grad if with_grad else all_gather_tensors
    if same_size:
        return torch.cat(gather(rows))
    sizes = all_gather_tensors(torch.tensor([rows.shape[0]], device=rows.device))
    longest = int(max(sizes))
    padded = torch.cat([rows, rows.new_zeros((longest - rows.shape[0], *rows.shape[1:]))])
    return torch.cat([part[: int(n)] for part, n in zip(gather(padded), sizes)])
