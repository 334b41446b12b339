"""Table streams' rows, stored once and drawn by each worker: no epochs × N copies on the driver.

The driver writes each table a run reads (constraint pairs, static targets, translation pairs, held-out sentences)
once to the run's storage as an uncompressed Arrow IPC file (``store_table``), named by a digest of its contents,
so a restart of the run writes nothing new. The plan carries a ``StoredTable`` (where, how many rows), not the rows.

A worker opens the file memory-mapped from its node's copy (``node_local``: one download a node, the page cache
shared by the node's workers) and takes the rows it needs (``MappedTable.take``). Arrow IPC, not parquet: a batch is
a few hundred rows at random places in the table, which a memory map reads by the page and parquet only by
decompressing whole row groups.

Every worker draws the same sequence of rows: epoch after epoch of the stream's order (``EpochRows``), a row's
*global position* g being row ``g mod N`` of epoch ``g // N``'s order. The workers of a step take consecutive
positions, so where a run stands is one number, the same on every worker, and a resume on another number of
workers continues from it with every position trained once (``distalign.data.stream_plugins.GlobalRowBatches``).
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.fs

from distalign.storage import node_local, run_location

TABLE_FILE = "table.arrow"
RECORD_BATCH_ROWS = 65_536  # rows of a record batch in the file: a take decodes nothing, so the size is free


@dataclass(frozen=True)
class StoredTable:
    """A table in the run's storage: what a plan carries instead of its rows."""

    uri: str  # the directory holding ``TABLE_FILE`` (local path or ``s3://``)
    rows: int
    endpoint_url: str = ""

    def open(self) -> MappedTable:
        """The table, memory-mapped from this node's copy (opened once per process)."""
        return _opened(self.uri, self.endpoint_url)


@functools.lru_cache(maxsize=8)
def _opened(uri: str, endpoint_url: str) -> MappedTable:
    path = Path(node_local(uri, endpoint_url)) / TABLE_FILE
    reader = pa.ipc.open_file(pa.memory_map(str(path)))
    return MappedTable([reader.get_batch(i) for i in range(reader.num_record_batches)], reader.schema)


class MappedTable:
    """A table as its record batches (memory-mapped or in memory) that takes rows without concatenating them:
    Arrow's take on a chunked table first copies the chunks into one (the whole file, for a mapped one)."""

    def __init__(self, batches: list[pa.RecordBatch], schema: pa.Schema):
        self.batches, self.schema = [b for b in batches if len(b)], schema
        self.starts = np.cumsum([0] + [len(b) for b in self.batches])

    @classmethod
    def of(cls, table: pa.Table) -> MappedTable:
        """A table held in memory (runs in this process without storage: tests, debugging)."""
        return cls(table.to_batches(), table.schema)

    def __len__(self) -> int:
        return int(self.starts[-1])

    def open(self) -> MappedTable:
        """Itself: a source of rows as a ``StoredTable`` is."""
        return self

    def table(self, columns: list[str] | None = None) -> pa.Table:
        """The whole table (zero-copy: still mapped), or some of its columns."""
        table = pa.Table.from_batches(self.batches, self.schema)
        return table.select(columns) if columns else table

    def take(self, indices: np.ndarray) -> pa.Table:
        """The rows at ``indices``, in their order, each record batch visited once."""
        indices = np.asarray(indices, dtype=np.int64)
        if not len(indices):
            return self.schema.empty_table()
        which = np.searchsorted(self.starts, indices, side="right") - 1
        by_batch = np.argsort(which, kind="stable")
        bounds = np.searchsorted(which[by_batch], np.arange(len(self.batches) + 1))
        parts = [
            self.batches[b].take(pa.array(indices[by_batch[lo:hi]] - self.starts[b]))
            for b, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:]))
            if hi > lo
        ]
        back = np.empty_like(by_batch)
        back[by_batch] = np.arange(len(by_batch))
        return pa.Table.from_batches(parts, self.schema).combine_chunks().take(pa.array(back))


def content_digest(table: pa.Table) -> str:
    """A digest of the table's schema and buffers: one pass over its bytes, no copy."""
    digest = hashlib.blake2b(table.schema.serialize().to_pybytes(), digest_size=12)
    digest.update(str(len(table)).encode())
    for batch in table.to_batches():
        for column in batch.columns:
            for buffer in column.buffers():
                if buffer is not None:
                    digest.update(buffer)
    return digest.hexdigest()


def store_table(table: pa.Table, storage_path: str, endpoint_url: str, run_name: str, name: str) -> StoredTable:
    """``table`` in the run's storage under ``tables/<name>-<digest>/``, written unless a file of the same contents
    is there already (a restart, a resume)."""
    fs, root, scheme = run_location(storage_path, endpoint_url, run_name)
    directory = f"{root}/tables/{name}-{content_digest(table)}"
    target = f"{directory}/{TABLE_FILE}"
    if fs.get_file_info(target).type != pyarrow.fs.FileType.File:
        fs.create_dir(directory, recursive=True)
        local = isinstance(fs, pyarrow.fs.LocalFileSystem)
        # an S3 object appears whole when its upload completes; a local file is renamed into place whole
        partial = f"{target}.{uuid.uuid4().hex}.partial" if local else target  # another writer's its own
        with fs.open_output_stream(partial) as out, pa.ipc.new_file(out, table.schema) as writer:
            writer.write_table(table, max_chunksize=RECORD_BATCH_ROWS)
        if local:
            fs.move(partial, target)
    return StoredTable(scheme + directory, len(table), endpoint_url if scheme == "s3://" else "")


class EpochRows:
    """The rows at global positions of a table stream: epoch ``g // N``'s order (``order_of(epoch)``: N row indices,
    the stream's draw), at ``g mod N``; with ``row`` (the position in its epoch) and ``epoch``, which seed a row's
    data-side randomness. One epoch's order is kept at a time (8 bytes a row)."""

    def __init__(self, table: MappedTable, order_of: Callable[[int], np.ndarray]):
        self.table, self.order_of = table, order_of
        self._epoch, self._order = -1, np.empty(0, dtype=np.int64)

    def _order_of(self, epoch: int) -> np.ndarray:
        if epoch != self._epoch:
            self._epoch, self._order = epoch, self.order_of(epoch)
        return self._order

    def at(self, positions: np.ndarray) -> pa.Table:
        """The rows at ``positions`` (ascending), in that order."""
        rows = len(self.table)
        epochs, within = np.divmod(np.asarray(positions, dtype=np.int64), rows)
        parts = []
        for epoch in np.unique(epochs).tolist():
            chosen = epochs == epoch
            part = self.table.take(self._order_of(epoch)[within[chosen]])
            part = part.set_column(part.schema.get_field_index("row"), "row", pa.array(within[chosen]))
            parts.append(part.append_column("epoch", pa.array(np.full(int(chosen.sum()), epoch, dtype=np.int64))))
        return pa.concat_tables(parts)
