"""Streams for training: the stream plugins of ``distalign.data.streams`` run on Ray (Data).

Every stream's rows are tokenised in ``map_batches`` and then, if an active objective transforms
that stream (masking), prepared on CPU by the objective's preparer with per-row random streams
seeded by (run seed, epoch, row), so each epoch draws new masks and every batch is regenerated
identically on resume.

- Table streams (``read_on_driver``: constraints, static vectors; small): as many epochs of the
  table, one after the other, as the run's steps need (``RunSchedule.max_steps``), each epoch the
  stream's draw (``Stream.draw``: static rows reshuffled per (seed, epoch), constraint pairs drawn by
  language pair with q ∝ p^α). Each worker gets datasets of its own (``shard_name``): rows r, r + W,
  ... (``worker_rows``, ``build_datasets``).
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
import functools
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import ray
import ray.data
import ray.train
import ray.util.scheduling_strategies
import torch

from distalign.config import ExperimentConfig
from distalign.data.corpus_plan import Item, Unit
from distalign.data.corpus_stream import CorpusStream, ledger_for, read_unit, row_keys
from distalign.data.row_random import RowRandom
from distalign.data.streams import STREAMS, Batch, Stream, StreamBatches, take_rows
from distalign.models.loading import load_tokenizer
from distalign.objectives.base import BatchPreparer, DataContext
from distalign.preparation.prepared import PreparedData
from distalign.preparation.schedule import run_schedule
from distalign.ray_session import reserved
from distalign.storage import node_local

TOKENIZE_BATCH = 256
log = logging.getLogger("distalign")


def stream_settings(config: ExperimentConfig, languages: list[str]) -> dict[str, Any]:
    """Tokenisation settings per stream: the stream's own, refined by the active objectives' needs."""
    settings = {name: stream.settings(config, languages) for name, stream in STREAMS.items()}
    for plugin, section in config.objectives.active().values():
        settings[plugin.stream] = plugin.stream_settings(section, config, settings[plugin.stream])
    return settings


@dataclass(frozen=True)
class StreamBatchJob:
    """What each task tokenising a stream's rows is sent (a table stream's Ray Data ``map_batches``, as
    ``fn_kwargs={"job": ...}``; the corpus's item tasks): how to tokenise and prepare them."""

    stream: Stream  # the plugin itself: a task needs no registry (a test's stream is not in the workers' one)
    tokenizer_path: str  # the run's model directory (``s3://`` when staged: read from the node's cache)
    settings: Any  # an instance of the stream's ``Settings`` dataclass
    preparer: BatchPreparer | None  # the active objective's data-side transformation of the stream, if any
    seed: int  # the run seed: with a row's epoch and position, it seeds the row's randomness
    endpoint_url: str  # the S3 endpoint of a staged tokenizer ("" = AWS's or local)


@functools.lru_cache(maxsize=4)
def staged_tokenizer(path: str, endpoint_url: str):
    """The tokenizer of the model at ``path``, staged on this node (``node_local``) once per process: a storage
    listing per batch would be an S3 request per batch."""
    return load_tokenizer(node_local(path, endpoint_url))


def build_stream_batch(batch: dict[str, np.ndarray], job: StreamBatchJob) -> dict[str, np.ndarray]:
    """Ray Data ``map_batches`` function: tokenise, then apply the stream's preparer (if any), each
    row's randomness seeded by (``job.seed``, its ``epoch``, its ``row``)."""
    tokenizer = staged_tokenizer(job.tokenizer_path, job.endpoint_url)
    out = job.stream.tokenize(batch, tokenizer, job.settings)
    if job.preparer is not None:
        epoch_of = dict(zip(batch["row"].tolist(), batch["epoch"].tolist()))  # packed rows: their first sentence's
        out.update(job.preparer(out, RowRandom(job.seed, [epoch_of[row] for row in out["row"].tolist()],
                                               out["row"].tolist())))
    return out


def stream_preparers(config: ExperimentConfig, ctx: DataContext, streams: set[str]) -> dict[str, BatchPreparer]:
    """The preparer of each of ``streams`` an active objective transforms (validation allows one per stream)."""
    active = config.objectives.active().values()
    return {plugin.stream: plugin.batch_preparer(section, ctx) for plugin, section in active
            if plugin.prepares and plugin.stream in streams}


def epochs_needed(rows: int, batch_size: int, num_workers: int, max_steps: int) -> int:
    """Passes over a table of ``rows`` that feed ``max_steps`` batches to every worker (one row each spare)."""
    return max(1, math.ceil((max_steps * batch_size + 1) * num_workers / max(rows, 1)))


def table_stream_names() -> tuple[str, ...]:
    """The streams read on the driver (asked at call time: a test may register a stream)."""
    return tuple(name for name, stream in STREAMS.items() if stream.read_on_driver)


# Item tasks a worker's corpus stream keeps submitted at once: the next item is read while the worker trains on one.
# Each further task can start one more task process, which imports torch and transformers (~3 s of CPU) before
# the first batch: four cost ~6 s of start-up on 2 cores.
CORPUS_TASK_SLOTS = 2


def stream_jobs(prepared: PreparedData, config: ExperimentConfig, wanted: tuple[str, ...]) -> dict[str, StreamBatchJob]:
    """The ``StreamBatchJob`` of each of the ``wanted`` streams that an active objective reads (each stream's
    preparer is built once: DICT-MLM's builds its synonym table)."""
    streams = config.objectives.streams() & set(wanted)
    word_pairs = prepared.word_pairs if config.objectives.uses_word_pairs else None
    endpoint = config.storage.endpoint_url
    ctx = DataContext(node_local(prepared.model_path, endpoint), prepared.languages, word_pairs,
                      config.data.max_seq_length)
    settings, preparers = stream_settings(config, prepared.languages), stream_preparers(config, ctx, streams)
    return {stream: StreamBatchJob(STREAMS[stream], prepared.model_path, settings[stream], preparers.get(stream),
                                   config.train.seed, endpoint)
            for stream in sorted(streams)}


@dataclass(frozen=True)
class TableStream:
    """A table stream read by an active objective: the rows of all the epochs the run needs, and their job."""

    table: pa.Table  # columns of the stream's table, plus ``epoch`` and ``row`` (the position in its epoch)
    job: StreamBatchJob


def table_streams(prepared: PreparedData, config: ExperimentConfig, max_steps: int) -> dict[str, TableStream]:
    """Every table stream an active objective reads, with as many epochs of rows as ``max_steps`` need."""
    t, streams = config.train, {}
    for stream, job in stream_jobs(prepared, config, table_stream_names()).items():
        table = STREAMS[stream].table(prepared)
        epochs = epochs_needed(len(table), STREAMS[stream].batch_size(t), t.num_workers,
                               max_steps * t.grad_accum_steps)
        if epochs > 1000:
            log.warning("stream '%s': %d epochs of %d rows for %d steps", stream, epochs, len(table), max_steps)
        rows_of = epoch_tables(stream, table, config)
        streams[stream] = TableStream(pa.concat_tables([rows_of(epoch) for epoch in range(epochs)]), job)
    return streams


@dataclass
class CorpusFeed:
    """What a worker needs to stream its share of the corpus (``RayWorkerData.corpus_items``)."""

    corpus: CorpusStream
    job: StreamBatchJob  # of each Ray task tokenising (and preparing) the corpus rows
    seed: int
    units: list[Unit]  # the corpus cut once, on the driver: every worker deals the same units
    mix_units: int  # units per item (``data.corpus_mix_units``)
    reserved_cpus: float  # per worker, for its corpus stream's tasks
    reserved: list = field(default_factory=list)  # a placement group of those CPUs per worker (reserve_corpus_cpus)

    @property
    def cpus(self) -> float:
        """Per item task: the reserved CPUs hold the CORPUS_TASK_SLOTS tasks submitted at once."""
        return self.reserved_cpus / CORPUS_TASK_SLOTS


def corpus_feed(prepared: PreparedData, config: ExperimentConfig, ledger: str = "") -> CorpusFeed | None:
    """The corpus stream's feed if an active objective reads it; ``ledger`` names the run's skip ledger actor."""
    job = stream_jobs(prepared, config, ("corpus",)).get("corpus")
    if job is None:
        return None
    d = config.data
    corpus = CorpusStream(prepared.corpus.sources, prepared.corpus.filesystem, ledger, d.corpus_unit_bytes)
    return CorpusFeed(corpus, job, config.train.seed, corpus.units(), d.corpus_mix_units, d.corpus_cpus_per_worker)


def item_blocks(item: Item, index: int, corpus: CorpusStream, job: StreamBatchJob) -> Iterator[dict[str, np.ndarray]]:
    """The sequences of one item in their order, in blocks as they are prepared (the first block comes after a
    chunk of the item is tokenised, not the whole item), the first ``item.skip`` dropped; column ``item`` =
    ``index``. The order is drawn from the item's own seed (not the worker's: the same on any worker).

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
        rounds = (_concat([build_stream_batch(chunk, job) for chunk in round_chunks if chunk is not None])
                  for round_chunks in itertools.zip_longest(*chunks))
        blocks = (shuffled(out, rng) for out in rounds)
    else:  # a sentence is a sequence: the ones trained are dropped before they are tokenised
        rows = {k: v[skip:] for k, v in shuffled(_concat(units), rng).items()}
        blocks, skip = (build_stream_batch(chunk, job) for chunk in row_chunks([rows], TOKENIZE_BATCH)), 0
    for block in blocks:
        dropped = min(skip, len(block["row"]))
        skip -= dropped
        if dropped < len(block["row"]):
            yield {**{k: v[dropped:] for k, v in block.items()},
                   "item": np.full(len(block["row"]) - dropped, index, dtype=np.int64)}


@ray.remote
def _item_task(item: Item, index: int, shared: tuple[CorpusStream, StreamBatchJob]) -> Iterator[dict[str, np.ndarray]]:
    """Ray streaming generator task over one item, a block at a time (``shared``: the feed's corpus and job, put
    in the object store once)."""
    yield from item_blocks(item, index, *shared)


@contextlib.contextmanager
def reserve_corpus_cpus(feed: CorpusFeed | None, workers: int, timeout_s: float = 600) -> Iterator[None]:
    """Reserve ``data.corpus_cpus_per_worker`` CPUs per worker for the corpus streams while the run lasts.

    Reserved before the run's datasets start, the CPUs are the workers' item tasks': Ray Data's table
    stream executions take a cluster's leftover CPUs, and on a small cluster would leave them none.
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


@dataclass
class RayWorkerData:
    """A Ray Train worker's ``WorkerData`` (``distalign.data.streams``): its datasets of the table streams
    (``build_datasets``), and its share of the corpus read by Ray tasks in its reserved CPUs."""

    rank: int
    workers: int
    corpus: CorpusFeed | None = None
    # a dataset's iterator by name: Ray Train's shard in its workers, the dataset's own in a run in this process
    dataset_shard: Callable[[str], ray.data.DataIterator] = ray.train.get_dataset_shard
    _shared: Any = None  # the object reference of (corpus, job), once put

    def table_pass(self, stream: Stream, batch_size: int) -> Iterable[Batch]:
        shard = self.dataset_shard(shard_name(stream.name, self.rank))
        # host tensors: the recipe trims and counts them on the host and moves them in its step (Ray's default
        # device, "auto", would put them on the worker's GPU here)
        return shard.iter_torch_batches(batch_size=batch_size, drop_last=True, device="cpu")

    def corpus_units(self) -> tuple[list[Unit], int, int]:
        return self.corpus.units, self.corpus.seed, self.corpus.mix_units

    def corpus_items(self, items: list[Item]) -> Iterable[dict[str, np.ndarray]]:
        """The items' sequences in order, a Ray streaming generator task each in this worker's reserved CPUs,
        ``CORPUS_TASK_SLOTS`` submitted at once: an item's blocks are taken as its task yields them."""
        feed = self.corpus
        if self._shared is None:
            self._shared = ray.put((feed.corpus, feed.job))  # DICT-MLM's preparer holds its synonym table
        options: dict[str, Any] = {"num_cpus": feed.cpus}
        if feed.reserved:  # this worker's tasks run in its own reserved CPUs
            options["scheduling_strategy"] = ray.util.scheduling_strategies.PlacementGroupSchedulingStrategy(
                feed.reserved[self.rank])
        read = _item_task.options(**options)
        submitted: collections.deque = collections.deque()
        try:
            for index, item in enumerate(items):
                submitted.append(read.remote(item, index, self._shared))
                if len(submitted) == CORPUS_TASK_SLOTS:
                    yield from map(ray.get, submitted.popleft())
            while submitted:
                yield from map(ray.get, submitted.popleft())
        finally:  # the run ended before them: a process that lives on (a reused trial's) must not keep them running
            for generator in submitted:
                ray.cancel(generator)


def epoch_tables(stream: str, table: pa.Table, config: ExperimentConfig) -> Callable[[int], pa.Table]:
    """Epoch -> the rows of that epoch (the stream's draw) with columns ``epoch`` and ``row`` (the
    position in it), which seed the rows' data-side randomness."""
    draw = STREAMS[stream].draw(table, config)

    def rows_of(epoch: int) -> pa.Table:
        rows = draw(epoch)
        position = pa.array(np.arange(len(rows), dtype=np.int64))
        rows = rows.set_column(rows.schema.get_field_index("row"), "row", position)
        return rows.append_column("epoch", pa.array(np.full(len(rows), epoch, dtype=np.int64)))

    return rows_of


def worker_rows(table: pa.Table, rank: int, workers: int) -> pa.Table:
    """Worker ``rank``'s rows of a table stream: rows r, r + W, r + 2W, ... (a distributed sampler's
    interleaving), trimmed to the same count for every worker."""
    per_worker = len(table) // workers
    return table.take(np.arange(rank, per_worker * workers, workers))


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
        pending.append(chunk)
        count += len(chunk["row"])
        while count >= size:
            yield take_rows(pending, size)
            count -= size
    if count:
        yield _concat(pending)


def tokenized_batches(chunks: Iterable[dict[str, np.ndarray]], job: StreamBatchJob,
                      batch_size: int) -> Iterator[dict[str, torch.Tensor]]:  # host-side: to_device moves them
    """Rows tokenised (and prepared) in this process in Ray Data's chunks of ``TOKENIZE_BATCH`` rows, then
    cut into batches of ``batch_size``, the last one dropped if short (packing makes fewer rows than sentences)."""
    pending: list[dict[str, np.ndarray]] = []
    for rows in row_chunks(chunks, TOKENIZE_BATCH):
        tensors = _concat(pending + [build_stream_batch(rows, job)])
        full = len(tensors["row"]) // batch_size * batch_size
        for start in range(0, full, batch_size):
            yield {k: torch.from_numpy(v[start:start + batch_size]) for k, v in tensors.items()}
        pending = [{k: v[full:] for k, v in tensors.items()}]


@dataclass
class LocalWorkerData:
    """A ``WorkerData`` in this process, without Ray: the same rows, tokenisation, preparers and seeds as
    ``RayWorkerData``."""

    tables: dict[str, TableStream]  # the active table streams (``table_streams``)
    corpus: CorpusFeed | None
    rank: int = 0
    workers: int = 1

    def table_pass(self, stream: Stream, batch_size: int) -> Iterable[Batch]:
        table = self.tables[stream.name]
        rows = worker_rows(table.table, self.rank, self.workers)
        chunks = ({name: chunk.column(name).to_numpy() for name in chunk.column_names}  # as Ray Data's numpy
                  for chunk in (rows.slice(start, TOKENIZE_BATCH) for start in range(0, len(rows), TOKENIZE_BATCH)))
        return tokenized_batches(chunks, table.job, batch_size)

    def corpus_units(self) -> tuple[list[Unit], int, int]:
        return self.corpus.units, self.corpus.seed, self.corpus.mix_units

    def corpus_items(self, items: list[Item]) -> Iterable[dict[str, np.ndarray]]:
        return (block for index, item in enumerate(items)
                for block in item_blocks(item, index, self.corpus.corpus, self.corpus.job))


def local_streams(prepared: PreparedData, config: ExperimentConfig, saved: dict[str, list[dict]] | None = None,
                  rank: int = 0, workers: int = 1) -> dict[str, StreamBatches]:
    """The batches worker ``rank`` of ``workers`` would read, built in this process without Ray
    (``LocalWorkerData``), from where ``saved`` (a checkpoint's stream states) left them: for tests and debugging."""
    data = LocalWorkerData(table_streams(prepared, config, run_schedule(config, prepared).max_steps),
                           corpus_feed(prepared, config), rank, workers)
    saved = saved or {}
    return {name: STREAMS[name].worker_batches(data, STREAMS[name].batch_size(config.train), saved.get(name))
            for name in sorted(config.objectives.streams())}


def shard_name(stream: str, rank: int) -> str:
    """The Ray Train dataset holding worker ``rank``'s rows of ``stream``."""
    return f"{stream}@{rank}"


def build_datasets(prepared: PreparedData, config: ExperimentConfig, max_steps: int) -> dict[str, ray.data.Dataset]:
    """One Ray Dataset per stream an active objective reads and per worker (see the module docstring).

    Worker r reads its rows of the stream's epochs (``worker_rows``): which rows a worker sees at a step
    is fixed by the data alone, not by how Ray Data schedules blocks, so it is the same on a resume.
    """
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False  # they would drown the training progress lines
    workers, datasets = config.train.num_workers, {}
    for name, stream in table_streams(prepared, config, max_steps).items():
        for rank in range(workers):
            rows = worker_rows(stream.table, rank, workers)
            datasets[shard_name(name, rank)] = ray.data.from_arrow(rows).map_batches(
                build_stream_batch, batch_size=TOKENIZE_BATCH, batch_format="numpy",
                num_cpus=config.data.tokenize_cpus, fn_kwargs={"job": stream.job})
    return datasets
