"""Rows of a stream kept unpadded between the task that makes them and the worker that trains on them.

A tokenised and prepared block is ``B,T`` tensors padded to the stream's width ``T`` (what the preparers draw
their per-row randomness over: ``distalign.data.row_random``). Sent through the object store as it is, most of
it is padding, in int64: five such tensors of a corpus row at T = 512 are 20 KB, whatever the sentence. A
``RaggedRows`` keeps each row's positions up to its *length* only, as int32, with one *fill* value per row and
tensor for the rest; ``padded(width)`` rebuilds the padded int64 tensors on the worker, a batch at a time.

A row's length is the shortest prefix after which every one of its ``B,T`` tensors holds a single value (the
row's fill, read at its last column), so ``padded(T)`` gives back exactly the block it was made from, and any
width between the batch's longest row and ``T`` gives the same block cut to that width (what
``distalign.data.batches.trim_padding`` does to a batch before the model sees it).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

INT32 = np.iinfo(np.int32)


@dataclass(frozen=True)
class RaggedRows:
    """``n`` rows: ``tokens[name]``, the int32 values of each row's first ``lengths[i]`` positions end to end;
    ``fills[name][i]``, the value of row i's other positions up to ``width``; ``columns``: the per-row tensors
    (``B``, ``B,D``), as they were."""

    lengths: np.ndarray  # int32 [n]
    tokens: dict[str, np.ndarray]  # B,T name -> int32 [lengths.sum()]
    fills: dict[str, np.ndarray]  # B,T name -> int32 [n]
    columns: dict[str, np.ndarray]  # name -> [n, ...]
    width: int  # T: the width the rows were padded to when they were made

    @classmethod
    def from_padded(cls, block: dict[str, np.ndarray], padded: Collection[str]) -> RaggedRows:
        """``block``'s ``padded`` tensors (integer, [n, T] each) unpadded; its other tensors kept as columns."""
        names = sorted(name for name in padded if name in block)
        widths = {block[name].shape[1] for name in names}
        if len(widths) != 1:
            raise ValueError(f"padded tensors {names} of several widths {sorted(widths)}")
        width = widths.pop()
        for name in names:
            values = block[name]
            out_of_range = values.size and (values.min() < INT32.min or values.max() > INT32.max)
            if values.dtype.kind not in "iu" or out_of_range:
                raise ValueError(f"tensor '{name}' ({values.dtype}) does not fit int32")
        fills = {name: block[name][:, -1] for name in names}
        # a row's length: one past the last column where some tensor differs from its fill
        differs = np.zeros((len(block[names[0]]), width), dtype=bool)
        for name in names:
            differs |= block[name] != fills[name][:, None]
        lengths = np.where(differs.any(1), width - np.argmax(differs[:, ::-1], axis=1), 0).astype(np.int32)
        kept = np.arange(width)[None, :] < lengths[:, None]
        return cls(
            lengths,
            {name: block[name][kept].astype(np.int32) for name in names},
            {name: fills[name].astype(np.int32) for name in names},
            {name: value for name, value in block.items() if name not in fills},
            width,
        )

    @classmethod
    def of_columns(cls, columns: dict[str, np.ndarray]) -> RaggedRows:
        """Rows with per-row columns only (rows of text before they are tokenised)."""
        count = len(next(iter(columns.values())))
        return cls(np.zeros(count, dtype=np.int32), {}, {}, dict(columns), 0)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, name: str) -> np.ndarray:
        """One tensor, a ``B,T`` one padded to the rows' width (tests, debugging: a worker pads whole batches)."""
        return self.columns[name] if name in self.columns else self._padded(name, self.width)

    @property
    def nbytes(self) -> int:
        """Bytes of its arrays (what it takes in the object store, less Ray's framing)."""
        arrays = [self.lengths, *self.tokens.values(), *self.fills.values(), *self.columns.values()]
        return sum(array.nbytes for array in arrays)

    def rows(self, start: int, stop: int) -> RaggedRows:
        """Rows [start, stop), as views."""
        offsets = np.concatenate([[0], np.cumsum(self.lengths, dtype=np.int64)])
        begin, end = offsets[start], offsets[stop]
        return RaggedRows(
            self.lengths[start:stop],
            {k: v[begin:end] for k, v in self.tokens.items()},
            {k: v[start:stop] for k, v in self.fills.items()},
            {k: v[start:stop] for k, v in self.columns.items()},
            self.width,
        )

    def with_columns(self, **columns: np.ndarray) -> RaggedRows:
        return RaggedRows(self.lengths, self.tokens, self.fills, {**self.columns, **columns}, self.width)

    @staticmethod
    def concat(parts: list[RaggedRows]) -> RaggedRows:
        """The rows of ``parts`` one after the other (all made from blocks of one stream and width)."""
        first = parts[0]
        if len({part.width for part in parts}) != 1:
            raise ValueError(f"rows of several widths {sorted({part.width for part in parts})}")

        def join(field: str) -> dict[str, np.ndarray]:
            return {k: np.concatenate([getattr(part, field)[k] for part in parts]) for k in getattr(first, field)}

        return RaggedRows(
            np.concatenate([part.lengths for part in parts]),
            join("tokens"),
            join("fills"),
            join("columns"),
            first.width,
        )

    def padded(self, width: int | None = None) -> dict[str, np.ndarray]:
        """Every tensor, the ``B,T`` ones as int64 [n, width] (default: the longest row); ``width`` at least the
        longest row and at most the width the rows were made at."""
        if not self.tokens:
            return dict(self.columns)
        longest = int(self.lengths.max(initial=0))
        width = longest if width is None else width
        if not longest <= width <= self.width:
            raise ValueError(f"width {width} outside [{longest}, {self.width}] (the longest row, the rows' width)")
        return {name: self._padded(name, width) for name in self.tokens} | self.columns

    def _padded(self, name: str, width: int) -> np.ndarray:
        tensor = np.repeat(self.fills[name].astype(np.int64)[:, None], width, axis=1)
        tensor[np.arange(width)[None, :] < self.lengths[:, None]] = self.tokens[name]
        return tensor
