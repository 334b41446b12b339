"""The batch contract's unit: a named tensor with its dtype and shape.

Each stream lists the tensors its batches carry (``distalign.data.stream_plugins``); an objective that
transforms a stream on the data side (masking) declares the tensors it adds in
``Objective.prepares``, and the names it reads in ``Objective.consumes``.
``tests/data/test_batch_contract.py`` checks every objective's reads against the streams' lists and
the lists against what the pipeline really makes.

A stream's ``B,T`` tensors are padded to its fixed width ``T`` (``model.max_word_tokens``,
``data.max_seq_length``): the data side cuts rows into batches without knowing the batch. The
training loop trims each batch to its longest row (``trim_padding``) before the model sees it, and gives a
batch with ``labels`` the flat positions of its labelled tokens (``with_label_index``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

import numpy as np
import torch

IGNORE_INDEX = -100  # the label of a position no loss reads (Hugging Face's and PyTorch's cross-entropy default)
LABEL_INDEX = "label_index"  # [M] int64: the row-major flat positions of a batch's labelled tokens


@dataclass(frozen=True)
class TensorSpec:
    name: str
    dtype: str  # numpy dtype name
    shape: str  # "B", "B,T" or "B,D"
    doc: str = ""

    def check(self, array: np.ndarray, stream: str) -> None:
        """Raise if ``array`` does not have this spec's dtype and rank."""
        rank = len(self.shape.split(","))
        if array.dtype != np.dtype(self.dtype) or array.ndim != rank:
            raise TypeError(
                f"stream '{stream}', tensor '{self.name}': expected {self.dtype}[{self.shape}], got "
                f"{array.dtype} with {array.ndim} dimensions"
            )


def padded_names(specs: Iterable[TensorSpec]) -> frozenset[str]:
    """The names of the ``B,T`` tensors among ``specs``: those padded to the stream's width."""
    return frozenset(spec.name for spec in specs if spec.shape == "B,T")


def trim_padding(batch: dict[str, torch.Tensor], padded: Collection[str], multiple: int = 1) -> dict[str, torch.Tensor]:
    """``batch`` with its ``padded`` tensors cut to the columns up to the last one that any row's
    ``attention_mask*`` among them uses, rounded up to a ``multiple`` (never past the padded width).

    The columns cut hold padding in every row: attention masks them out, pooling and the losses
    skip them, so the losses are the untrimmed batch's (to rounding) at a fraction of the positions.
    One width per batch, all its sequences' (a constraint pair's two sides are encoded in one pass).
    Host tensors: a few microseconds, no device synchronisation. Views, not copies.
    """
    masks = [batch[name] for name in padded if name.startswith("attention_mask")]
    if not masks:
        return batch
    longest = max(_columns_used(mask) for mask in masks)
    keep = max(1, -(-longest // multiple) * multiple)
    if keep >= max(batch[name].shape[1] for name in padded):
        return batch
    return {name: tensor[:, :keep] if name in padded else tensor for name, tensor in batch.items()}


def _columns_used(mask: torch.Tensor) -> int:
    """Columns up to the last one that some row of the [B, T] ``mask`` attends to."""
    columns = mask.any(0).nonzero()
    return int(columns[-1]) + 1 if len(columns) else 0


def with_label_index(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``batch`` with ``label_index`` where it has ``labels`` (as it is otherwise): the positions, in row-major
    order of the flattened [B, T] batch, of the tokens with a label. Made on the host after trimming (the width
    fixes the flat positions): the objectives then select the labelled rows with ``index_select``, where a boolean
    mask on the device would make the host wait for the step's earlier work to learn the count."""
    labels = batch.get("labels")
    if labels is None:
        return batch
    return batch | {LABEL_INDEX: (labels.reshape(-1) != IGNORE_INDEX).nonzero().squeeze(1)}
