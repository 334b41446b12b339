"""Which worker reads which bytes of the corpus, epoch after epoch, and where each one stands.

The corpus is cut into *units* (``cut_units``): byte ranges of a text or JSON lines file (a unit owns the
lines that start inside it), parquet row groups, row ranges of a Hugging Face dataset saved to disk (a
streamed one is one unit). The cut is a function of the listing alone, so every worker makes it itself from
the stored listing, as columns (``Units``): U reaches millions, and neither the driver nor a worker's plan
holds an object per unit. Every epoch the units are dealt to the
workers (``dealt``): in a seeded permutation of (seed, epoch), each to the worker with the fewest
bytes so far, so that every unit is read by exactly one worker and two workers' bytes differ by at
most one unit, whatever the file sizes. A worker's units are read ``mix_units`` at a time as one
*group*, whose sequences are shuffled together (the group's own seed) to mix languages.

A worker's position is its list of remaining groups (``Item``: epoch, units, sequences of it already
trained). A resume on as many workers takes each worker's list back; on another number of workers
(``resume_items``) the remaining groups of every epoch in progress are dealt again to the new
workers, so the epoch goes on with no row trained twice and none skipped. Nothing here reads a file.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

MIN_UNITS = 256  # a small corpus is cut finer (down to MIN_UNIT_BYTES), so a few workers all get units
MIN_UNIT_BYTES = 4096
HF_UNIT_ROWS = 10000  # rows of a Hugging Face dataset saved to disk per unit


@dataclass(frozen=True)
class Unit:
    """A piece of one source, read by one worker: bytes [start, end) of a text/jsonl file (the lines that start
    there), row groups [start, end) of a parquet file, rows [start, end) of a Hugging Face dataset
    (end -1: a streamed dataset, whole)."""

    source: int  # index in the run's corpus sources
    path: str  # the file ("" for a Hugging Face dataset)
    start: int
    end: int
    size: int  # bytes (rows for a Hugging Face dataset): what balancing weighs
    # the file's index in its source and its bytes as listed: what a reader needs of the listing (no list of the
    # files on the workers). Not compared: a checkpoint's units (older ones lack them) are matched to the listing's
    file: int = field(default=0, compare=False)
    listed: int = field(default=0, compare=False)


@dataclass(frozen=True)
class Item:
    """A group of units a worker reads and mixes at once, in one epoch; ``skip``: its sequences already trained."""

    epoch: int
    units: tuple[Unit, ...]
    skip: int = 0

    @property
    def size(self) -> int:
        return sum(u.size for u in self.units)

    def to_json(self) -> dict:
        return {"epoch": self.epoch, "skip": self.skip, "units": [asdict(u) for u in self.units]}

    @classmethod
    def from_json(cls, data: dict) -> Item:
        return cls(data["epoch"], tuple(Unit(**u) for u in data["units"]), data["skip"])


def unit_bytes(total_bytes: int, largest: int) -> int:
    """The byte size of the file units: at most ``largest``, and in a small corpus small enough for
    ``MIN_UNITS`` units (but not below ``MIN_UNIT_BYTES``). A function of the corpus alone: the units must not
    change with the number of workers."""
    return min(largest, max(MIN_UNIT_BYTES, math.ceil(total_bytes / MIN_UNITS)))


def byte_ranges(size: int, step: int) -> list[tuple[int, int]]:
    """[0, size) in ceil(size / step) ranges of equal length (the last one shorter by less than one byte each)."""
    starts, ends, _ = range_columns(np.array([size], dtype=np.int64), step)
    return list(zip(starts.tolist(), ends.tolist()))


def range_columns(sizes: np.ndarray, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every file of ``sizes`` in ceil(size / step) ranges (at least one) of equal length: (starts, ends, each
    range's file). Bound i of a file of n ranges is round(i * size / n), half to even, as Python's ``round`` of the
    exact quotient (float64 holds i * size exactly below 2**53 bytes: the cut a checkpoint's units were made by)."""
    counts = np.maximum(1, -(-sizes // step))
    owner = np.repeat(np.arange(len(sizes)), counts)
    index = np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)
    size, count = sizes[owner], counts[owner]
    starts = np.round(index * size / count).astype(np.int64)
    ends = np.round((index + 1) * size / count).astype(np.int64)
    return starts, ends, owner


@dataclass(frozen=True)
class Units(Sequence[Unit]):
    """Units as columns (one array each, a path object per unit shared with its file's), in the corpus's order: a
    worker deals them by ``size`` and makes ``Unit`` objects only of the ones it reads (``take``)."""

    source: np.ndarray
    file: np.ndarray
    path: np.ndarray  # object: each unit's file name
    start: np.ndarray
    end: np.ndarray
    size: np.ndarray
    listed: np.ndarray

    def __len__(self) -> int:
        return len(self.size)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return self.take(np.arange(len(self))[index])
        return self.take([index])[0]

    def take(self, indices: Iterable[int] | np.ndarray) -> list[Unit]:
        indices = np.asarray(indices, dtype=np.int64)
        columns = (self.source, self.path, self.start, self.end, self.size, self.file, self.listed)
        return [Unit(*values) for values in zip(*(c[indices].tolist() for c in columns))]

    def of_files(self, paths: set[str]) -> list[Unit]:
        """The units of the files named (a resume checks a checkpoint's units against them: O(U) once)."""
        return self.take([i for i, path in enumerate(self.path.tolist()) if path in paths])

    @classmethod
    def of(cls, units: Sequence[Unit]) -> Units:
        """Units from a list of ``Unit`` (tests, a Hugging Face source's few)."""
        ints = {
            name: np.array([getattr(u, name) for u in units], dtype=np.int64)
            for name in ("source", "file", "start", "end", "size", "listed")
        }
        return cls(path=np.array([u.path for u in units] or [], dtype=object), **ints)

    @classmethod
    def concat(cls, parts: Sequence[Units]) -> Units:
        names = ("source", "file", "path", "start", "end", "size", "listed")
        return cls(**{name: np.concatenate([getattr(p, name) for p in parts]) for name in names})


def cut_units(source: int, kind: str, paths: list[str], sizes: list[int], pieces: list[list[int]], step: int) -> Units:
    """One source's units. ``sizes``: each file's bytes as listed; ``pieces``: each parquet file's row-group
    bytes (one list per file; empty lists otherwise); ``step``: bytes per text unit (``unit_bytes``)."""
    listed, names = np.asarray(sizes, dtype=np.int64), np.array(paths, dtype=object)
    if kind == "parquet":
        counts = np.array([len(groups) for groups in pieces], dtype=np.int64)
        owner = np.repeat(np.arange(len(paths)), counts)
        starts = np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)
        ends, size = starts + 1, np.array([g for groups in pieces for g in groups], dtype=np.int64)
    else:
        starts, ends, owner = range_columns(listed, step)
        kept = ends > starts
        starts, ends, owner = starts[kept], ends[kept], owner[kept]
        size = ends - starts
    return Units(np.full(len(owner), source), owner, names[owner], starts, ends, size, listed[owner])


def hf_units(source: int, rows: int | None) -> Units:
    """A Hugging Face dataset's units: row ranges of ``HF_UNIT_ROWS``, or the whole of a streamed one (None)."""
    if rows is None:
        return Units.of([Unit(source, "", 0, -1, 1)])
    return Units.of([Unit(source, "", start, end, end - start) for start, end in byte_ranges(rows, HF_UNIT_ROWS)])


def deal(sizes: Sequence[int] | np.ndarray, order: np.ndarray, workers: int) -> list[list[int]]:
    """Indices of ``sizes`` in ``order``, each to the worker with the smallest total so far (ties: the lowest
    rank): two workers' totals differ by at most the largest size. O(U log W) (it runs on every worker, every
    epoch): a heap of one int per worker, total * workers + rank, whose order is that of (total, rank)."""
    heap, owners = list(range(workers)), list[int]()
    replace, owned = heapq.heapreplace, owners.append  # bound once: the loop runs U times
    for step in (np.asarray(sizes, dtype=np.int64)[order] * workers).tolist():
        key = heap[0]
        replace(heap, key + step)
        owned(key % workers)
    owner = np.asarray(owners, dtype=np.int64)
    mine = order[np.argsort(owner, kind="stable")]  # each worker's indices, in the order it was dealt them
    return [part.tolist() for part in np.split(mine, np.cumsum(np.bincount(owner, minlength=workers))[:-1])]


def dealt(units: Units, seed: int, epoch: int, workers: int) -> list[np.ndarray]:
    """Each worker's unit indices of ``epoch``: the units in the permutation of (seed, epoch), dealt by bytes."""
    order = np.random.default_rng([seed, epoch]).permutation(len(units))
    return [np.asarray(mine, dtype=np.int64) for mine in deal(units.size, order, workers)]


def grouped(units: Sequence[Unit], epoch: int, mix_units: int) -> list[Item]:
    return [Item(epoch, tuple(units[i : i + mix_units])) for i in range(0, len(units), mix_units)]


def fresh_items(units: Units, seed: int, epoch: int, workers: int, rank: int, mix_units: int) -> list[Item]:
    return grouped(units.take(dealt(units, seed, epoch, workers)[rank]), epoch, mix_units)


@dataclass
class Position:
    """A worker's place in the corpus stream: the items it has yet to finish (the first one maybe begun), then
    every epoch from ``next_epoch`` on dealt among ``workers``."""

    items: list[Item]
    next_epoch: int
    workers: int

    def to_json(self) -> dict:
        return {"items": [i.to_json() for i in self.items], "next_epoch": self.next_epoch, "workers": self.workers}

    @classmethod
    def from_json(cls, data: dict) -> Position:
        return cls([Item.from_json(i) for i in data["items"]], data["next_epoch"], data["workers"])


def resume_items(units: Units, seed: int, mix_units: int, saved: list[Position], rank: int, workers: int) -> Position:
    """Worker ``rank``'s position among ``workers`` after a run on ``len(saved)`` workers stopped at ``saved``.

    Same number of workers: its own position. Otherwise every epoch some old worker is still in is finished
    by the new workers: the old workers' remaining items of that epoch, and the whole items of those that had
    not reached it yet, dealt by bytes (an item begun keeps its skip: it is read again by one worker, which
    drops what was trained); then the epochs after are dealt among the new workers.
    """
    if len(saved) == workers:
        return saved[rank]
    old_workers = saved[0].workers
    last = max(p.next_epoch for p in saved)  # the first epoch no old worker has begun
    items: list[Item] = []
    for epoch in range(min(min((i.epoch for i in p.items), default=p.next_epoch) for p in saved), last):
        left = [i for p in saved for i in p.items if i.epoch == epoch]
        behind = [old for old, p in enumerate(saved) if p.next_epoch <= epoch]
        if behind:  # the epoch's deal among the old workers, once (not once per old worker: O(W_old · U))
            shares = dealt(units, seed, epoch, old_workers)
            left += [i for old in behind for i in grouped(units.take(shares[old]), epoch, mix_units)]
        order = np.random.default_rng([seed, epoch, workers]).permutation(len(left))
        items += [left[i] for i in deal([i.size for i in left], order, workers)[rank]]
    return Position(items, last, workers)


def within(position: Position, units: Units) -> tuple[Position, list[str]]:
    """``position`` without the units that are not among ``units`` (the corpus as listed now: a file that
    vanished or changed size since the checkpoint is cut otherwise), and the files of those left out. Their
    rows are skipped for the epoch rather than read from offsets that no longer hold the same rows; a begun
    item that lost a unit is left out whole (its skip counts sequences of the item as it was). The units kept
    are the listing's own (with their file index and listed size)."""
    now = {u: u for u in units.of_files({u.path for i in position.items for u in i.units})}
    items = []
    for item in position.items:
        kept = tuple(now[u] for u in item.units if u in now)
        if len(kept) == len(item.units):
            items.append(Item(item.epoch, kept, item.skip))
        elif kept and not item.skip:
            items.append(Item(item.epoch, kept))
    gone = sorted({u.path for i in position.items for u in i.units if u not in now})
    return Position(items, position.next_epoch, position.workers), gone
