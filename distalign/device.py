"""The training device's two habits: fast fp32 matrix products, and batches that cross to it without waiting.

- ``use_tensor_cores(device)``: on CUDA, fp32 matrix products and convolutions run in TF32 (10-bit mantissa
  inputs, fp32 accumulation), as the Hugging Face Trainer's ``tf32`` and PyTorch's ``set_float32_matmul_precision
  ("high")`` do; strict fp32 leaves an H100's tensor cores idle (about 8x fewer FLOP/s). bf16 runs are unaffected
  where autocast already chose bf16. Every process that computes on a GPU calls it first: a training worker, the
  transfer fine-tuning, the X2Static extraction, the benches.
- ``to_device(batch, device)``: host tensors copied from pinned memory with ``non_blocking=True``, so the copy
  queues behind the previous step's kernels instead of waiting for them (a pageable copy synchronises the host).
  PyTorch's caching host allocator reuses the pinned blocks, and records the copy's stream so a block is not
  reused before its copy ran. Batches stay on the host until here: trimming and token counting read host values.
"""

from __future__ import annotations

import torch


def use_tensor_cores(device: torch.device | str) -> None:
    """TF32 for fp32 matrix products and cuDNN convolutions where ``device`` is a CUDA device (a no-op else)."""
    if torch.device(device).type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """``batch``'s tensors on ``device``: from pinned host memory without a host sync on CUDA, as they are else."""
    if device.type != "cuda":
        return {name: tensor.to(device) for name, tensor in batch.items()}
    return {
        name: (tensor if tensor.is_pinned() else tensor.pin_memory()).to(device, non_blocking=True)
        if tensor.device.type == "cpu"
        else tensor.to(device)
        for name, tensor in batch.items()
    }
