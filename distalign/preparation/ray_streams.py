"""Streams for training: the stream plugins of ``distalign.data.stream_plugins`` run on Ray (Data).

Every stream's rows are tokenised in ``map_batches`` and then, if an active objective transforms
that stream (masking), prepared on CPU by the objective's preparer with per-row random streams
seeded by (run seed, epoch, row), so each epoch draws new masks and every batch is regenerated
identically on resume.

- Table streams (``read_on_driver``: constraints, static vectors, translation pairs): each table written once
  to the run's storage (``store_tables``, ``distalign.preparation.table_rows``), the plan carrying where it is. A worker
  draws its own rows: epoch after epoch of the stream's draw (``Stream.epoch_order``: static rows reshuffled per
  (seed, epoch), constraint pairs drawn by language pair with q ∝ p^α), at global positions (``GlobalRowBatches``:
  the W workers of a step take its W·B consecutive positions). Ray tasks of ``data.tokenize_cpus`` read and
  tokenise a batch each, ``TABLE_TASK_SLOTS`` ahead of the step (``RayWorkerData.table_batches``).
- The corpus stream: never on the driver. The driver cuts the corpus into units (byte ranges, row
  groups; ``distalign.data.corpus_plan``); each epoch every worker reads the units dealt to it, a
  few at a time as one item, in Ray tasks that read an item's rows, shuffle them and yield its sequences
  tokenised and prepared a chunk at a time (``item_blocks``, ``RayWorkerData.corpus_items``): the first
  batch waits for a chunk, not the whole item. Ray generator tasks, not a Ray Data dataset: Ray Data's
  streaming executor, which would run in the training worker's process, spins while the training step
  holds its output back (its scheduling loop does not wait when a task's output is ready but not
  taken). On the quickstart the worker process's CPU time per step fell from 52.0 to 33.8 ms without
  it (docs/benchmarks.md, "Real run against a plain script").

A worker asks each stream for its batches (``Stream.worker_batches``) with a ``WorkerData``:
``RayWorkerData`` in a Ray Train worker, ``LocalWorkerData`` in this process without Ray
(``local_streams``: the same rows, tokenisation, preparers and seeds, for tests and debugging).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import itertools
import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import ray
import ray.util.scheduling_strategies
import torch

from distalign.config import ExperimentConfig
from distalign.data.batches import padded_names
from distalign.data.corpus_plan import Item, Units
from distalign.data.corpus_stream import CorpusStream, ledger_for, read_unit, row_keys
from distalign.data.ragged import RaggedRows
from distalign.data.row_random import RowRandom
from distalign.data.run_facts import RunFacts
from distalign.data.stream_plugins import DRAW_EPOCH, STREAMS, Batch, Stream, StreamBatches, take_rows
from distalign.models.loading import load_tokenizer
from distalign.objectives.base import BatchPreparer, DataContext
from distalign.preparation.prepared import PreparedData
from distalign.preparation.table_rows import EpochRows, MappedTable, StoredTable, store_table
from distalign.ray_session import reserved
from distalign.storage import node_local

TOKENIZE_BATCH = 256
TABLE_TASK_SLOTS = 2  # batches of a table stream each worker has submitted at once (its tasks: data.tokenize_cpus)


def stream_settings(config: ExperimentConfig, languages: list[str]) -> dict[str, Any]:
    """Tokenisation settings per stream: the stream's own, refined by the active objectives' needs."""
    facts = config.run_facts()
    settings = {name: stream.settings(facts, languages) for name, stream in STREAMS.items()}
    for plugin, section in config.objectives.active().values():
        settings[plugin.stream] = plugin.stream_settings(section, facts, settings[plugin.stream])
    return settings


@dataclass(frozen=True)
class StreamBatchJob:
    """What each task tokenising a stream's rows is sent (in a table stream's ``TableStream``; the corpus's item
    tasks): how to tokenise and prepare them."""

    stream: Stream  # the plugin itself: a task needs no registry (a test's stream is not in the workers' one)
    tokenizer_path: str  # the run's model directory (``s3://`` when staged: read from the node's cache)
    settings: Any  # an instance of the stream's ``Settings`` dataclass
    preparer: BatchPreparer | None  # the active objective's data-side transformation of the stream, if any
    seed: int  # the run seed: with a row's epoch and position, it seeds the row's randomness
    endpoint_url: str  # the S3 endpoint of a staged tokenizer ("" = AWS's or local)
    padded: frozenset[str]  # its B,T tensors, the preparer's included: sent unpadded (``RaggedRows``)


@functools.lru_cache(maxsize=4)
def staged_tokenizer(path: str, endpoint_url: str):
    """The tokenizer of the model at ``path``, staged on this node (``node_local``) once per process: a storage
    listing per batch would be an S3 request per batch."""
    return load_tokenizer(node_local(path, endpoint_url))


def build_stream_batch(batch: dict[str, np.ndarray], job: StreamBatchJob) -> dict[str, np.ndarray]:
    """Rows (numpy columns) tokenised, then prepared by the stream's preparer (if any), each row's randomness
    seeded by (``job.seed``, its ``epoch``, its ``row``)."""
    tokenizer = staged_tokenizer(job.tokenizer_path, job.endpoint_url)
    out = job.stream.tokenize(batch, tokenizer, job.settings)
    if job.preparer is not None:
        epoch_of = dict(zip(batch["row"].tolist(), batch["epoch"].tolist()))  # packed rows: their first sentence's
        out.update(
            job.preparer(out, RowRandom(job.seed, [epoch_of[row] for row in out["row"].tolist()], out["row"].tolist()))
        )
    return out


def stream_preparers(config: ExperimentConfig, ctx: DataContext, streams: set[str]) -> dict[str, BatchPreparer]:
    """The preparer of each of ``streams`` an active objective transforms (validation allows one per stream)."""
    active = config.objectives.active().values()
    return {
        plugin.stream: plugin.batch_preparer(section, ctx)
        for plugin, section in active
        if plugin.prepares and plugin.stream in streams
    }


def table_stream_names() -> tuple[str, ...]:
    """The streams read on the driver (asked at call time: a test may register a stream)."""
    return tuple(name for name, stream in STREAMS.items() if stream.read_on_driver)


# Item tasks a worker's corpus stream keeps submitted at least: the next item is read while the worker trains on one.
# Each further task can start one more task process, which imports torch and transformers (~3 s of CPU) before
# the first batch: four cost ~6 s of start-up on 2 cores. A worker with more CPUs reserved runs one task per CPU
# (``CorpusFeed.slots``): tokenising is then parallel across as many items.
CORPUS_TASK_SLOTS = 2
# Blocks an item task may have yielded that its worker has not taken yet (Ray's generator backpressure): the task
# pauses there. Enough for the tasks of the items after the one being trained on to tokenise most of theirs
# meanwhile (an item of 4 units of 1 MiB is ~160 blocks one sentence a sequence, ~40 packed), and a bound on what
# a worker holds in the object store: slots x 64 blocks of at most TOKENIZE_BATCH sequences, unpadded int32.
ITEM_BLOCKS_AHEAD = 64


def stream_jobs(prepared: PreparedData, config: ExperimentConfig, wanted: tuple[str, ...]) -> dict[str, StreamBatchJob]:
    """The ``StreamBatchJob`` of each of the ``wanted`` streams that an active objective reads (each stream's
    preparer is built once: DICT-MLM's builds its synonym table)."""
    streams = config.objectives.streams() & set(wanted)
    word_pairs = prepared.word_pairs if config.objectives.uses_word_pairs else None
    endpoint = config.storage.endpoint_url
    ctx = DataContext(
        node_local(prepared.model_path, endpoint), prepared.languages, word_pairs, config.data.max_seq_length
    )
    settings, preparers = stream_settings(config, prepared.languages), stream_preparers(config, ctx, streams)
    active = config.objectives.active().values()
    return {
        stream: StreamBatchJob(
            STREAMS[stream],
            prepared.model_path,
            settings[stream],
            preparers.get(stream),
            config.train.seed,
            endpoint,
            padded_names(
                STREAMS[stream].tensors
                + tuple(spec for plugin, _ in active if plugin.stream == stream for spec in plugin.prepares)
            ),
        )
        for stream in sorted(streams)
    }


class TableSource(Protocol):
    """Where a table stream's rows are: a ``StoredTable`` (a run's), or a ``MappedTable`` in memory
    (``local_streams``)."""

    def open(self) -> MappedTable: ...


@dataclass(frozen=True)
class TableStream:
    """A table stream an active objective reads: where its rows are, how they are drawn and tokenised."""

    source: TableSource
    job: StreamBatchJob
    facts: RunFacts  # its draw's settings (``Stream.epoch_order``: train.seed, data.sampling_alpha)
    cpus: float  # of each Ray task reading and tokenising a batch (``data.tokenize_cpus``)

    @functools.cached_property
    def draw_key(self) -> str:
        """Names this stream's draw in a process's cache of opened draws (``_epoch_rows``)."""
        return json.dumps(
            [self.job.stream.name, getattr(self.source, "uri", id(self.source)), dataclasses.asdict(self.facts)],
            sort_keys=True,
            default=str,
        )


def store_tables(prepared: PreparedData, config: ExperimentConfig) -> dict[str, StoredTable]:
    """Every table the run's workers read, written once to the run's storage (``store_table``): each active table
    stream's, the constraint pairs where an objective trains on word pairs, and the held-out sentences of the MLM
    validation loss (``validation``)."""
    tables = {
        name: STREAMS[name].table(prepared) for name in sorted(stream_jobs(prepared, config, table_stream_names()))
    }
    if config.objectives.uses_word_pairs:  # the same table as the constraints stream's: one file
        tables["constraints"] = prepared.constraints
    if prepared.validation is not None:
        tables["validation"] = prepared.validation
    s = config.storage
    return {name: store_table(table, s.path, s.endpoint_url, config.run.name, name) for name, table in tables.items()}


def table_streams(
    prepared: PreparedData, config: ExperimentConfig, sources: dict[str, TableSource]
) -> dict[str, TableStream]:
    """Every table stream an active objective reads, its rows at ``sources`` (``store_tables``'s)."""
    return {
        stream: TableStream(sources[stream], job, config.run_facts(), config.data.tokenize_cpus)
        for stream, job in stream_jobs(prepared, config, table_stream_names()).items()
    }


OPENED_DRAWS = 4  # table streams whose draw a process keeps open (each holds an epoch's order, 8 bytes a row)
_opened_draws: collections.OrderedDict[str, EpochRows] = collections.OrderedDict()


def _epoch_rows(stream: TableStream) -> EpochRows:
    """The stream's rows by global position, opened once per process (a task process serves many batches)."""
    key = stream.draw_key
    if key not in _opened_draws:
        table = stream.source.open()
        _opened_draws[key] = EpochRows(table, stream.job.stream.epoch_order(table.table(), stream.facts))
        if len(_opened_draws) > OPENED_DRAWS:
            _opened_draws.popitem(last=False)
    _opened_draws.move_to_end(key)
    return _opened_draws[key]


def table_batch(stream: TableStream, positions: np.ndarray) -> dict[str, np.ndarray]:
    """The stream's rows at the global ``positions``, tokenised and prepared (``build_stream_batch``), with their
    ``epoch`` where the stream declares it (``DRAW_EPOCH``)."""
    rows = _epoch_rows(stream).at(positions)
    columns = {name: rows.column(name).to_numpy(zero_copy_only=False) for name in rows.column_names}
    out = build_stream_batch(columns, stream.job)
    return out | {"epoch": columns["epoch"]} if DRAW_EPOCH.name in stream.job.stream.names else out


@ray.remote
def _table_task(stream: TableStream, positions: np.ndarray) -> dict[str, np.ndarray]:
    """A Ray task reading and tokenising one batch of a table stream (``stream``: put in the object store once)."""
    return table_batch(stream, positions)


def submitted_ahead(refs: Iterable[Any], slots: int) -> Iterator[Any]:
    """The Ray object references of ``refs`` in order, each yielded once the ``slots - 1`` after it are submitted
    (the next reads run while the worker trains on one); the ones still submitted are cancelled when the caller
    stops (a process that lives on, a reused trial's, must not keep them running)."""
    submitted: collections.deque = collections.deque()
    try:
        for ref in refs:
            submitted.append(ref)
            if len(submitted) == slots:
                yield submitted.popleft()
        while submitted:
            yield submitted.popleft()
    finally:  # (a generator closed after its Ray session ended has nothing left to cancel: no new session)
        for ref in submitted if ray.is_initialized() else ():
            ray.cancel(ref)


@dataclass
class CorpusFeed:
    """What a worker needs to stream its share of the corpus (``RayWorkerData.corpus_items``)."""

    corpus: CorpusStream  # its listing in storage (``CorpusStream.for_workers``): each worker cuts the same units
    job: StreamBatchJob  # of each Ray task tokenising (and preparing) the corpus rows
    seed: int
    mix_units: int  # units per item (``data.corpus_mix_units``)
    reserved_cpus: float  # per worker, for its corpus stream's tasks
    reserved: list = field(default_factory=list)  # a placement group of those CPUs per worker (reserve_corpus_cpus)

    @property
    def slots(self) -> int:
        """Item tasks submitted at once: one per reserved CPU, at least ``CORPUS_TASK_SLOTS``."""
        return max(CORPUS_TASK_SLOTS, math.floor(self.reserved_cpus))

    @property
    def cpus(self) -> float:
        """Per item task: the reserved CPUs hold the ``slots`` tasks submitted at once."""
        return self.reserved_cpus / self.slots


def corpus_feed(
    prepared: PreparedData, config: ExperimentConfig, ledger: str = "", in_storage: bool = True
) -> CorpusFeed | None:
    """The corpus stream's feed if an active objective reads it; ``ledger`` names the run's skip ledger actor. The
    corpus listing goes to the run's storage once (``in_storage``; else held in memory: ``local_streams``) and the
    feed carries where it is: nothing pickled into a worker grows with the files or units."""
    job = stream_jobs(prepared, config, ("corpus",)).get("corpus")
    if job is None:
        return None
    d, s = config.data, config.storage
    corpus = CorpusStream(prepared.corpus.sources, prepared.corpus.filesystem, ledger, d.corpus_unit_bytes)
    corpus = (
        stored_corpus(corpus, s.path, s.endpoint_url, config.run.name)
        if in_storage
        else corpus.for_workers(MappedTable.of(corpus.files()))
    )
    return CorpusFeed(corpus, job, config.train.seed, d.corpus_mix_units, d.corpus_cpus_per_worker)


def stored_corpus(corpus: CorpusStream, storage_path: str, endpoint_url: str, run_name: str) -> CorpusStream:
    """The corpus stream as the workers get it: its listing written once to the run's storage (O(files), a restart
    writes nothing), the stream carrying where it is instead of the file lists."""
    stored = store_table(corpus.files(), storage_path, endpoint_url, run_name, "corpus-files")
    return corpus.for_workers(stored)


def item_blocks(item: Item, index: int, corpus: CorpusStream, job: StreamBatchJob) -> Iterator[RaggedRows]:
    """The sequences of one item in their order, in blocks as they are prepared (the first block comes after a
    chunk of the item is tokenised, not the whole item), the first ``item.skip`` dropped; column ``item`` =
    ``index``. The order is drawn from the item's own seed (not the worker's: the same on any worker). Each
    block is prepared padded to the stream's width (the preparers draw over it) and leaves unpadded, int32
    (``RaggedRows``): the worker pads a batch at a time.

    The units' rows that the item's epoch keeps are read first (cheap next to tokenising them). One sentence a
    sequence: the rows are shuffled together, then tokenised and prepared in chunks of ``TOKENIZE_BATCH``.
    Packed (``data.pack_sequences``): sentences are packed within chunks of ``TOKENIZE_BATCH`` consecutive rows of
    one unit, so the sequences are only known once a chunk is packed; the item goes in rounds, round r packing
    every unit's r-th chunk and shuffling their sequences together, so that every round mixes all the units.
    """
    ledger = ledger_for(corpus.ledger)
    units = [read_unit(corpus, unit, item.epoch, job.seed, ledger) for unit in item.units]
    first = item.units[0]
    rng = np.random.default_rng([job.seed, item.epoch, int(row_keys("", corpus.place(first), [first.start])[0])])
    skip = item.skip
    if job.settings.pack:
        chunks = [list(row_chunks([rows], TOKENIZE_BATCH)) for rows in units]
        rounds = (
            _concat([build_stream_batch(chunk, job) for chunk in round_chunks if chunk is not None])
            for round_chunks in itertools.zip_longest(*chunks)
        )
        blocks = (shuffled(out, rng) for out in rounds)
    else:  # a sentence is a sequence: the ones trained are dropped before they are tokenised
        rows = {k: v[skip:] for k, v in shuffled(_concat(units), rng).items()}
        blocks, skip = (build_stream_batch(chunk, job) for chunk in row_chunks([rows], TOKENIZE_BATCH)), 0
    for block in blocks:
        dropped = min(skip, len(block["row"]))
        skip -= dropped
        if dropped < len(block["row"]):
            kept = RaggedRows.from_padded({k: v[dropped:] for k, v in block.items()}, job.padded)
            yield kept.with_columns(item=np.full(len(kept), index, dtype=np.int64))


@ray.remote
def _item_task(
    item: Item, index: int, shared: tuple[CorpusStream, StreamBatchJob], cpus: float
) -> Iterator[RaggedRows]:
    """Ray streaming generator task over one item, a block at a time (``shared``: the feed's corpus and job, put
    in the object store once). The Rust tokenizer's threads are as many as the task's CPUs (by default one per
    core of the node in every task process); read when its thread pool starts, at the process's first encoding."""
    os.environ.setdefault("RAYON_NUM_THREADS", str(max(1, math.floor(cpus))))
    yield from item_blocks(item, index, *shared)


@contextlib.contextmanager
def reserve_corpus_cpus(feed: CorpusFeed | None, workers: int, timeout_s: float = 600) -> Iterator[None]:
    """Reserve ``data.corpus_cpus_per_worker`` CPUs per worker for the corpus streams while the run lasts.

    Reserved before the workers start, the CPUs are the workers' item tasks': the table streams' tasks take a
    cluster's leftover CPUs, and on a small cluster would leave them none.
    """
    if feed is None:
        yield
        return
    what = f"data.corpus_cpus_per_worker={feed.reserved_cpus} CPUs for each of {workers} workers"
    with reserved([{"CPU": feed.reserved_cpus}] * workers, what, timeout_s) as groups:
        feed.reserved = groups
        try:
            yield
        finally:
            feed.reserved = []


def host_tensors(batch: dict[str, np.ndarray]) -> Batch:  # host-side: the recipe's step moves them
    """A batch as host tensors: the recipe trims and counts them on the host and moves them in its step. Arrays
    read from the object store are read-only: those are copied (torch's tensors assume they may write)."""
    return {k: torch.from_numpy(np.require(v, requirements="W")) for k, v in batch.items()}


@dataclass
class RayWorkerData:
    """A Ray Train worker's ``WorkerData`` (``distalign.data.stream_plugins``): its batches of the table streams, each
    read and tokenised by a Ray task, and its share of the corpus read by Ray tasks in its reserved CPUs."""

    rank: int
    workers: int
    corpus: CorpusFeed | None = None
    tables: dict[str, TableStream] = field(default_factory=dict)  # the active table streams (``table_streams``)
    _shared: Any = None  # the object reference of (corpus, job), once put

    def table_batches(self, stream: Stream, positions: Iterable[np.ndarray]) -> Iterator[Batch]:
        table = self.tables[stream.name]
        # the cluster's CPUs, not the caller's placement group: a Tune trial's would capture them (and hold none)
        anywhere = ray.util.scheduling_strategies.PlacementGroupSchedulingStrategy(placement_group=None)
        shared, read = ray.put(table), _table_task.options(num_cpus=table.cpus, scheduling_strategy=anywhere)
        for ref in submitted_ahead((read.remote(shared, batch) for batch in positions), TABLE_TASK_SLOTS):
            yield host_tensors(ray.get(ref))

    @functools.cached_property
    def _units(self) -> Units:
        return self.corpus.corpus.units()

    def corpus_units(self) -> tuple[Units, int, int]:
        return self._units, self.corpus.seed, self.corpus.mix_units

    def corpus_items(self, items: Iterable[Item]) -> Iterable[RaggedRows]:
        """The items' sequences in order, a Ray streaming generator task each in this worker's reserved CPUs,
        ``CorpusFeed.slots`` submitted at once, each ``ITEM_BLOCKS_AHEAD`` blocks ahead at most: an item's blocks
        are taken as its task yields them."""
        feed = self.corpus
        if self._shared is None:
            self._shared = ray.put((feed.corpus, feed.job))  # DICT-MLM's preparer holds its synonym table
        options: dict[str, Any] = {"num_cpus": feed.cpus, "_generator_backpressure_num_objects": ITEM_BLOCKS_AHEAD}
        if feed.reserved:  # this worker's tasks run in its own reserved CPUs
            options["scheduling_strategy"] = ray.util.scheduling_strategies.PlacementGroupSchedulingStrategy(
                feed.reserved[self.rank]
            )
        read = _item_task.options(**options)
        for generator in submitted_ahead(
            (read.remote(item, index, self._shared, feed.cpus) for index, item in enumerate(items)), feed.slots
        ):
            yield from map(ray.get, generator)


def shuffled(columns: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The rows of ``columns`` in a permutation drawn from ``rng``."""
    order = rng.permutation(len(columns["row"]))
    return {k: v[order] for k, v in columns.items()}


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}


def row_chunks(chunks: Iterable[dict[str, np.ndarray]], size: int) -> Iterator[dict[str, np.ndarray]]:
    """The rows of ``chunks`` (numpy columns) regrouped into chunks of ``size`` rows, the last one shorter."""
    pending, count = [], 0
    for chunk in chunks:
        pending.append(RaggedRows.of_columns(chunk))
        count += len(pending[-1])
        while count >= size:
            yield take_rows(pending, size).columns
            count -= size
    if count:
        yield RaggedRows.concat(pending).columns


@dataclass
class LocalWorkerData:
    """A ``WorkerData`` in this process, without Ray: the same rows, tokenisation, preparers and seeds as
    ``RayWorkerData``."""

    tables: dict[str, TableStream]  # the active table streams (``table_streams``)
    corpus: CorpusFeed | None
    rank: int = 0
    workers: int = 1

    def table_batches(self, stream: Stream, positions: Iterable[np.ndarray]) -> Iterator[Batch]:
        return (host_tensors(table_batch(self.tables[stream.name], batch)) for batch in positions)

    def corpus_units(self) -> tuple[Units, int, int]:
        return self.corpus.corpus.units(), self.corpus.seed, self.corpus.mix_units

    def corpus_items(self, items: Iterable[Item]) -> Iterable[RaggedRows]:
        return (
            block
            for index, item in enumerate(items)
            for block in item_blocks(item, index, self.corpus.corpus, self.corpus.job)
        )


def local_streams(
    prepared: PreparedData,
    config: ExperimentConfig,
    saved: dict[str, list[dict]] | None = None,
    rank: int = 0,
    workers: int = 1,
) -> dict[str, StreamBatches]:
    """The batches worker ``rank`` of ``workers`` would read, built in this process without Ray or storage
    (``LocalWorkerData``, the tables held in memory), from where ``saved`` (a checkpoint's stream states) left
    them: for tests and debugging."""
    held = {name: MappedTable.of(table) for name, table in prepared.tables.items()}
    data = LocalWorkerData(
        table_streams(prepared, config, held), corpus_feed(prepared, config, in_storage=False), rank, workers
    )
    saved = saved or {}
    return {
        name: STREAMS[name].worker_batches(data, STREAMS[name].batch_size(config.train), saved.get(name))
        for name in sorted(config.objectives.streams())
    }
