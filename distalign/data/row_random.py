"""Per-row random streams for data-side batch transformations (masking, code-switching).

Every row draws from its own generator seeded by (run seed, epoch, row index), and always draws
fixed-width vectors (one value per token position), so a row's mask does not depend on which
rows share its batch, on the batch size, on the worker or on the device that trains on it: a
resumed run regenerates exactly the batches it would have seen.
"""

from __future__ import annotations

# host-side module: the draws are made on the data side, on CPU, before a batch reaches any device
from collections.abc import Sequence

import numpy as np
import torch


def row_seed(seed: int, epoch: int, row: int) -> int:
    """A 63-bit generator seed mixed from the three integers (numpy's SeedSequence hashing)."""
    state = np.random.SeedSequence([int(seed), int(epoch), int(row)]).generate_state(1, dtype=np.uint64)[0]
    return int(state) >> 1


class RowRandom:
    """Random draws for a batch, one independent stream per row (see the module docstring)."""

    def __init__(self, seed: int, epoch: int | Sequence[int], rows: Sequence[int]):
        """``epoch``: one for every row, or each row's own."""
        epochs = [epoch] * len(rows) if isinstance(epoch, int) else list(epoch)
        if len(epochs) != len(rows):
            raise ValueError(f"{len(epochs)} epochs for {len(rows)} rows")
        self.generators = [torch.Generator().manual_seed(row_seed(seed, e, r)) for e, r in zip(epochs, rows)]

    @classmethod
    def for_batch(cls, batch_size: int, seed: int = 0, epoch: int = 0) -> RowRandom:
        """Streams for rows ``0 .. batch_size-1`` (tests and one-off batches)."""
        return cls(seed, epoch, range(batch_size))

    def rand(self, *shape: int) -> torch.Tensor:
        """[B, *shape] uniforms in [0, 1); row b's values come from row b's stream."""
        return (
            torch.stack([torch.rand(shape, generator=g) for g in self.generators])
            if self.generators
            else torch.empty(0, *shape)
        )

    def randint(self, high: int, *shape: int) -> torch.Tensor:
        """[B, *shape] integers in [0, high)."""
        return (
            torch.stack([torch.randint(high, shape, generator=g) for g in self.generators])
            if self.generators
            else torch.empty(0, *shape, dtype=torch.long)
        )
