"""Training streams as plugins: one class per kind of training rows, and the ``STREAMS`` registry.

A stream owns everything about its rows that is not an objective's business (as an ``Objective``
owns its loss): its tensors (the batch contract: every objective reads only tensors of its stream,
plus what its own preparer adds; ``tests/data/test_batch_contract.py``) and batch-size key; its
typed tokenisation settings, which the objectives reading it refine (``Objective.stream_settings``);
its tokenisation; where its rows are (a table read on the driver, or streamed by each worker); its
per-epoch draw; its rows per epoch (``train.epochs``); its preparation on the driver (``prepare``: its table read,
selected and checked, at least a batch per worker); a worker's endless iterator over its batches
(``worker_batches``), which says where it stands (``StreamBatches.state``, saved in every checkpoint, so
a resume continues there, on any number of workers); its data sources' checks; the CPUs its Ray tasks take.
How rows become batches is the ``WorkerData`` a worker passes in: Ray tasks in a Ray Train worker, or this process
(tests, debugging), both in ``distalign.preparation.ray_streams``, which runs every stream from here.

Shapes: ``B`` rows, ``T`` tokens (a stream's fixed padded width), ``D`` static vector dimension.
Every stream carries ``row``, the row's identity: its position in its epoch for a table stream, a hash
of its place in the corpus files for the corpus. With the epoch and the run seed it seeds the row's
data-side randomness (``distalign.data.row_random``). A stream that declares ``epoch`` (``DRAW_EPOCH`` for a
table stream) has it in its batches: ``train.trace_rows`` then records where each row was drawn.

Adding a stream: a subclass here (or anywhere) and a line in ``STREAMS`` (docs/how-to/add-a-stream.md).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import pyarrow as pa
import torch

from distalign.data.batches import TensorSpec
from distalign.data.corpus_plan import Item, Position, Units, fresh_items, resume_items, within
from distalign.data.corpus_stream import CorpusStream, read_rows
from distalign.data.gloss_inputs import encode_words_with_gloss
from distalign.data.ragged import RaggedRows
from distalign.data.readers import ReadReport, read_parallel
from distalign.data.run_facts import RunFacts
from distalign.data.sampling import pair_sampling_weights, sampled_order, shuffled_order
from distalign.data.tokenize import encode_packed_sentences, encode_sentence_pairs, encode_sentences, encode_words
from distalign.errors import ConfigError, require

log = logging.getLogger("distalign")
ROW = TensorSpec("row", "int64", "B", "identity of the row: position in its epoch, or place in the corpus files")
DRAW_EPOCH = TensorSpec("epoch", "int64", "B", "the epoch of the stream's draw the row is in")
Batch = dict[str, Any]  # tensor name -> torch.Tensor, as a worker's objectives read it


class WorkerData(Protocol):
    """How one worker's rows of a stream become its batches: tokenised (and prepared by the objective's
    preparer) and cut into batches of ``batch_size``, the last one dropped if short."""

    rank: int
    workers: int

    def table_batches(self, stream: Stream, positions: Iterable[np.ndarray]) -> Iterator[Batch]:
        """A batch for each array of ``positions``: the driver-read stream's rows there (global positions in its
        endless sequence of epochs, ``distalign.preparation.table_rows``), tokenised and prepared, in order. The
        positions are taken as needed (an implementation may read a few batches ahead)."""

    def corpus_units(self) -> tuple[Units, int, int]:
        """The corpus cut into units, the run seed and the units a worker mixes at once (``corpus_plan``)."""

    def corpus_items(self, items: Iterable[Item]) -> Iterable[RaggedRows]:
        """The sequences of ``items`` (an endless iterator, taken as needed: a few items ahead at most) in order
        (tokenised, prepared, each item's shuffled and its ``skip`` first ones dropped), in unpadded blocks with a
        column ``item``: the index in ``items`` of each sequence's."""


class StreamInputs(Protocol):
    """What a stream's ``prepare`` reads on the driver (``distalign.preparation.inputs`` makes it): the run's
    config, inputs already read and checked, and the services of the layers above this one."""

    config: Any  # the run's experiment config (its package, distalign.config, sits above this one)
    corpus: CorpusStream  # the corpus sources, listed
    word_pairs: pa.Table  # the run's training word pairs: evaluation words out, sampled, ``synset_index`` and ``row``
    model_path: str  # the model on this machine ("tiny" until it is built: before, for streams not ``needs_model``)
    reports: list[ReadReport]  # a stream's readers add theirs: malformed rows are reported with the others
    tokenizer_texts: list[str]  # texts a tiny model's tokenizer also learns from: a stream adds its own

    def static_targets(self) -> pa.Table | None:
        """Word vectors for the static stream (read from ``data.static_vectors``, or derived from the model), None
        where a check does without them: a service of the preparation layer, whose imports this one cannot make."""
        ...


class StreamBatches(Protocol):
    """A worker's endless batches of one stream, and where it stands after the last one it gave."""

    def __next__(self) -> Batch: ...

    def state(self) -> dict: ...


class GlobalRowBatches:
    """A worker's batches of a driver-read stream: at each step the W workers take the next W·B global positions
    of the stream's rows (``distalign.preparation.table_rows``), worker r the r-th B of them. Its state is the next
    global position, the same on every worker: a resume on any number of workers continues there, every position
    trained once."""

    def __init__(self, data: WorkerData, stream: Stream, batch_size: int, saved: list[dict] | None):
        self.position = resumed_position(saved, batch_size)  # after the last batch given
        self.step_rows = data.workers * batch_size
        first = self.position + data.rank * batch_size
        self.batches = data.table_batches(
            stream, (np.arange(start, start + batch_size) for start in itertools.count(first, self.step_rows))
        )

    def __iter__(self):
        return self

    def __next__(self) -> Batch:
        batch = next(self.batches)
        self.position += self.step_rows
        return batch

    def state(self) -> dict:
        return {"position": self.position}


def resumed_position(saved: list[dict] | None, batch_size: int) -> int:
    """The global position a table stream resumes at: where every worker's saved state says (a checkpoint written
    before global positions counted the batches each worker had taken: as many rows of W·B)."""
    if not saved:
        return 0
    if "position" in saved[0]:
        return int(saved[0]["position"])
    return int(saved[0]["batches"]) * len(saved) * batch_size


# Items dealt past the last one that yielded a sequence before a worker is said to starve: more than any reader
# reads ahead (``RayWorkerData``: one item per reserved CPU), so every epoch this far back has ended.
STARVED_AFTER_ITEMS = 1024


class CorpusBatches:
    """A worker's corpus batches: its items (``corpus_plan``) read in order, cut into batches of ``batch_size``
    sequences (across items and epochs). The items are one endless sequence, each next epoch dealt as the reader
    asks for its first item, so the reader reads ahead across an epoch's end as within an epoch (the first batch of
    an epoch does not wait for its first item to be read). Its state is its ``Position`` after the last batch it
    gave: the item it is in, with the sequences of it trained, and the items after it (with any dealt ahead)."""

    def __init__(self, data: WorkerData, batch_size: int, position: Position):
        self.data, self.batch_size, self.workers = data, batch_size, position.workers
        self.plan = list(position.items)  # the items carried over, then every epoch dealt so far
        self.next_epoch = position.next_epoch
        self.at, self.trained = 0, position.items[0].skip if position.items else 0
        self.fed = -1  # the last item that yielded a sequence
        self.spans: dict[int, tuple[int, int]] = {}  # each dealt epoch's items [first, end) not yet fed past
        self.batches = self._batches()

    def __iter__(self):
        return self

    def __next__(self) -> Batch:
        return next(self.batches)

    def _items(self) -> Iterator[Item]:
        """The plan's items, endlessly: past its end, the next epoch dealt to this worker."""
        units, seed, mix_units = self.data.corpus_units()
        for index in itertools.count():
            if index == len(self.plan):
                dealt = fresh_items(units, seed, self.next_epoch, self.workers, self.data.rank, mix_units)
                if not dealt:
                    raise ValueError(self._starved(self.next_epoch))
                self.spans[self.next_epoch] = (index, index + len(dealt))
                self.plan += dealt
                self.next_epoch += 1
            self._check_fed(index - STARVED_AFTER_ITEMS)  # a reader that never yields again: no endless dealing
            yield self.plan[index]

    def _batches(self) -> Iterator[Batch]:
        pending: list[RaggedRows] = []
        count = 0  # sequences pending
        for block in self.data.corpus_items(self._items()):
            items = block.columns["item"]
            self._check_fed(int(items[0]))  # the items before this block's have ended
            self.fed = int(items[-1])
            pending.append(block)
            count += len(block)
            while count >= self.batch_size:
                rows, count = take_rows(pending, self.batch_size), count - self.batch_size
                batch = rows.padded(collated_width(rows))
                items = batch.pop("item")
                batch["epoch"] = np.array([self.plan[i].epoch for i in items.tolist()], dtype=np.int64)
                self._advance(items)
                yield {k: torch.from_numpy(v) for k, v in batch.items()}  # host-side: to_device moves it

    def _check_fed(self, ended: int) -> None:
        """Raise if a dealt epoch's items all ended (every item before ``ended`` has) with no sequence."""
        for epoch, (first, end) in list(self.spans.items()):
            if end <= self.fed + 1:
                del self.spans[epoch]  # fed within or after it
            elif first > self.fed and end <= ended:
                raise ValueError(self._starved(epoch))

    def _starved(self, epoch: int) -> str:
        return (
            f"corpus: worker {self.data.rank} of {self.workers} got no sentence in epoch {epoch} (fewer corpus "
            f"units than workers: data.corpus_unit_bytes cuts files finer)"
        )

    def _advance(self, items: np.ndarray) -> None:
        """Move past a batch whose sequences came from ``items`` (plan indices, in order)."""
        last = int(items[-1])
        taken = int((items == last).sum())
        self.trained = self.trained + taken if last == self.at else self.plan[last].skip + taken
        self.at = last

    def state(self) -> dict:
        rest = (
            [dataclasses.replace(self.plan[self.at], skip=self.trained)] + self.plan[self.at + 1 :] if self.plan else []
        )
        return Position(rest, self.next_epoch, self.workers).to_json()


# A corpus batch is padded to its longest row rounded up to this (never past the stream's width), not to the width:
# every width multiple the training loop trims to (``trim_padding``, 8 on CUDA) divides it, so the trimmed batch is
# the one a batch padded to the stream's width would give.
COLLATE_MULTIPLE = 64


def collated_width(rows: RaggedRows) -> int:
    return min(rows.width, -(-int(rows.lengths.max(initial=1)) // COLLATE_MULTIPLE) * COLLATE_MULTIPLE)


def take_rows(pending: list[RaggedRows], size: int) -> RaggedRows:
    """The first ``size`` rows of the blocks in ``pending``, which hold at least that many, taken out of it: copied
    into new arrays, the rest of a block left as a view. Only the rows taken are copied: a batch at a time out of
    an item of thousands of sequences."""
    parts, needed = [], size
    while needed:
        head = pending[0]
        if len(head) <= needed:
            parts.append(pending.pop(0))
            needed -= len(head)
        else:
            parts.append(head.rows(0, needed))
            pending[0] = head.rows(needed, len(head))
            needed = 0
    return RaggedRows.concat(parts)


class Stream:
    name: ClassVar[str]
    doc: ClassVar[str]
    default_batch_size: ClassVar[int]  # rows per worker per micro-batch unless train.batch_sizes.<name> says
    minimum_batch_size: ClassVar[int] = 1
    tensors: ClassVar[tuple[TensorSpec, ...]]
    Settings: ClassVar[type]  # its tokenisation settings (a frozen dataclass)
    # True: a table the driver reads once (``table``), split among the workers by row; False: each worker
    # streams its own share from the sources (the corpus, whose ``worker_batches`` does so)
    read_on_driver: ClassVar[bool] = True
    # train.epochs and eval.every_epochs count passes over the active stream with the lowest rank (None: never)
    epoch_rank: ClassVar[int | None] = None
    holds_word_pairs: ClassVar[bool] = False  # its sources also give the run's training word pairs
    needs_model: ClassVar[bool] = False  # its ``prepare`` reads the model: called once the model is built

    @property
    def names(self) -> set[str]:
        return {t.name for t in self.tensors}

    @property
    def batch_size_key(self) -> str:
        """The config key of its batch size."""
        return f"train.batch_sizes.{self.name}"

    def batch_size(self, train_config) -> int:
        """Rows per worker per micro-batch (``train.batch_sizes``)."""
        return train_config.batch_sizes.get(self.name, self.default_batch_size)

    def settings(self, facts: RunFacts, languages: list[str]) -> Any:
        """The run's tokenisation settings for this stream, before the objectives refine them."""
        raise NotImplementedError

    def tokenize(self, batch: dict[str, np.ndarray], tokenizer, settings) -> dict[str, np.ndarray]:
        """A batch of its rows (numpy columns) -> its tensors (``row`` added if the encoding made none)."""
        raise NotImplementedError

    def prepare(self, inputs: StreamInputs) -> pa.Table | None:
        """Its rows for a run, read, selected and checked on the driver (``read_on_driver`` streams, when an active
        objective reads them; the preparation layer adds the ``row`` column). None: nothing to train on, which only
        a check (``distalign check``) may leave."""
        return None

    def table(self, prepared) -> pa.Table | None:
        """Its rows as prepared for the run (``prepare``)."""
        return prepared.tables.get(self.name)

    def require_batch_per_worker(self, rows: int, inputs: StreamInputs, key: str, what: str, remedy: str) -> None:
        """Raise ``ConfigError`` naming ``key`` unless ``rows`` fill one batch on every worker."""
        t = inputs.config.train
        batch = self.batch_size(t)
        require(
            rows >= batch * t.num_workers,
            key,
            f"{what}, fewer than one batch per worker (at least {self.batch_size_key}={batch} x train.num_workers="
            f"{t.num_workers} = {batch * t.num_workers}): {remedy}",
        )

    def rows(self, prepared) -> int:
        """Rows in one epoch."""
        return len(self.table(prepared))

    def epoch_order(self, table: pa.Table, facts: RunFacts) -> Callable[[int], np.ndarray]:
        """Epoch -> the row indices of ``table`` in that epoch's order: every row once, reshuffled per (seed, epoch)
        (the same batches every epoch would repeat batch statistics, e.g. Deep CCA's)."""
        return lambda epoch: shuffled_order(len(table), facts.seed, epoch)

    def worker_batches(self, data: WorkerData, batch_size: int, saved: list[dict] | None = None) -> StreamBatches:
        """A worker's batches, endless: its share of every step's global positions, epoch after epoch of the
        stream's draw; ``saved``: every worker's ``state()`` at the checkpoint resumed from."""
        return GlobalRowBatches(data, self, batch_size, saved)

    def check_sources(self, data, readers: list[str]) -> None:
        """Raise ``ConfigError`` if the active objectives ``readers`` read it but ``data`` (a files run) has
        no source for it."""

    def cpus(self, data) -> tuple[str, float]:
        """(pool, CPUs) each worker's Ray Data tasks of this stream take; streams of one pool share them."""
        return "table streams", data.tokenize_cpus


def _word_pair_side(side: str) -> tuple[TensorSpec, ...]:
    return (
        TensorSpec(f"input_ids{side}", "int64", "B,T", f"word {side} alone ([CLS] w [SEP]) or with its gloss"),
        TensorSpec(f"attention_mask{side}", "int64", "B,T"),
        TensorSpec(f"word_mask{side}", "int64", "B,T", "1 on the word's own subword tokens"),
        TensorSpec(f"gloss_mask{side}", "int64", "B,T", "1 on the gloss's tokens (all 0 without glosses)"),
    )


@dataclass(frozen=True)
class WordPairTokens:
    """The constraints stream: each word of a pair alone, or with its synset gloss."""

    max_tokens: int  # subword budget of one encoded word (with its gloss)
    with_gloss: bool


class ConstraintsStream(Stream):
    name = "constraints"
    doc = "word pairs (lexical constraints / dictionary entries), each word encoded on its own"
    default_batch_size = 32
    minimum_batch_size = 2  # InfoNCE: a pair's negatives are the batch's other pairs
    tensors = (
        _word_pair_side("1")
        + _word_pair_side("2")
        + (TensorSpec("synset", "int64", "B", "dense synset label of the pair"), ROW, DRAW_EPOCH)
    )
    Settings = WordPairTokens
    epoch_rank = 0
    holds_word_pairs = True

    def settings(self, facts: RunFacts, languages: list[str]) -> WordPairTokens:
        return WordPairTokens(max_tokens=facts.max_word_tokens, with_gloss=False)

    def tokenize(self, batch, tokenizer, settings: WordPairTokens) -> dict[str, np.ndarray]:
        out = {"synset": batch["synset_index"].astype(np.int64)}
        for side in ("1", "2"):
            words = batch[f"word{side}"].tolist()
            if settings.with_gloss:
                encoded = encode_words_with_gloss(tokenizer, words, batch[f"gloss{side}"].tolist(), settings.max_tokens)
            else:
                encoded = encode_words(tokenizer, words, settings.max_tokens)
                encoded["gloss_mask"] = np.zeros_like(encoded["word_mask"])
            out.update({f"{key}{side}": value for key, value in encoded.items()})
        out["row"] = batch["row"].astype(np.int64)
        return out

    def prepare(self, inputs: StreamInputs) -> pa.Table:
        """The run's training word pairs (the preparation layer reads and samples them: the tiny model's vocabulary
        and the objectives that train on word pairs read them too)."""
        pairs = len(inputs.word_pairs)
        self.require_batch_per_worker(
            pairs,
            inputs,
            "data.constraints",
            f"only {pairs} constraint pairs left after excluding evaluation words",
            f"give more pairs outside the evaluation dictionaries, or a smaller {self.batch_size_key}",
        )
        return inputs.word_pairs

    def epoch_order(self, table: pa.Table, facts: RunFacts) -> Callable[[int], np.ndarray]:
        """Rows drawn with replacement so that language pair k makes up q_k ∝ p_k^α of them
        (``data.sampling_alpha``, BabelBERT)."""
        weights = pair_sampling_weights(table, facts.sampling_alpha)
        return lambda epoch: sampled_order(weights, facts.seed, epoch)

    def check_sources(self, data, readers: list[str]) -> None:
        require(
            bool(data.constraints or data.dictionaries) or not readers,
            "data.constraints",
            f"objectives {sorted(readers)} need data.constraints or data.dictionaries",
        )


@dataclass(frozen=True)
class SentenceTokens:
    """The corpus stream: sentences, one a sequence or packed."""

    max_length: int
    languages: tuple[str, ...]  # a sentence's lang_id is its language's index here
    pack: bool  # consecutive sentences of one language packed up to max_length


class CorpusSentencesStream(Stream):
    name = "corpus"
    doc = "corpus sentences, whitespace words split into subwords"
    default_batch_size = 16
    tensors = (
        TensorSpec("input_ids", "int64", "B,T"),
        TensorSpec("attention_mask", "int64", "B,T"),
        TensorSpec("word_ids", "int64", "B,T", "each token's word index in its sentence, -1 on specials/padding"),
        TensorSpec("lang_id", "int64", "B", "the sentence language's index in the run's languages"),
        ROW,
        TensorSpec("epoch", "int64", "B", "the corpus epoch the row was read in (a row is read once an epoch)"),
    )
    Settings = SentenceTokens
    read_on_driver = False
    epoch_rank = 1

    def settings(self, facts: RunFacts, languages: list[str]) -> SentenceTokens:
        return SentenceTokens(max_length=facts.max_seq_length, languages=tuple(languages), pack=facts.pack_sequences)

    def tokenize(self, batch, tokenizer, settings: SentenceTokens) -> dict[str, np.ndarray]:
        index = {lang: i for i, lang in enumerate(settings.languages)}
        langs = [index[lang] for lang in batch["lang"].tolist()]
        if settings.pack:  # fewer sequences than sentences, each with its first sentence's row
            return encode_packed_sentences(
                tokenizer, batch["text"].tolist(), langs, batch["row"].tolist(), settings.max_length
            )
        out = encode_sentences(tokenizer, batch["text"].tolist(), settings.max_length)
        out["lang_id"] = np.array(langs, dtype=np.int64)
        out["row"] = batch["row"].astype(np.int64)
        return out

    def rows(self, prepared) -> int:
        return prepared.corpus_rows

    def worker_batches(self, data: WorkerData, batch_size: int, saved: list[dict] | None = None) -> StreamBatches:
        """A worker's batches, epoch after epoch, each epoch the units dealt to it; a resume continues every
        epoch in progress where the saved workers were, however many they were (``corpus_plan.resume_items``)."""
        position = Position([], 0, data.workers)
        if saved:
            units, seed, mix_units = data.corpus_units()
            position, gone = within(
                resume_items(units, seed, mix_units, [Position.from_json(s) for s in saved], data.rank, data.workers),
                units,
            )
            if gone:
                log.warning(
                    "corpus: files changed since the checkpoint, their rows left out of the epoch being resumed: %s",
                    ", ".join(gone),
                )
        return CorpusBatches(data, batch_size, position)

    def check_sources(self, data, readers: list[str]) -> None:
        require(bool(data.corpora) or not readers, "data.corpora", f"objectives {sorted(readers)} need data.corpora")

    def cpus(self, data) -> tuple[str, float]:
        return "corpus", data.corpus_cpus_per_worker


@dataclass(frozen=True)
class WordTokens:
    """The static stream: each word alone."""

    max_tokens: int


class StaticVectorsStream(Stream):
    name = "static"
    doc = "words with their fixed static vectors"
    default_batch_size = 64
    tensors = (
        TensorSpec("input_ids", "int64", "B,T"),
        TensorSpec("attention_mask", "int64", "B,T"),
        TensorSpec("word_mask", "int64", "B,T"),
        TensorSpec("vector", "float32", "B,D"),
        ROW,
        DRAW_EPOCH,
    )
    Settings = WordTokens

    def settings(self, facts: RunFacts, languages: list[str]) -> WordTokens:
        return WordTokens(max_tokens=facts.max_word_tokens)

    def tokenize(self, batch, tokenizer, settings: WordTokens) -> dict[str, np.ndarray]:
        out = encode_words(tokenizer, batch["word"].tolist(), settings.max_tokens)
        out["vector"] = np.stack(batch["vector"]).astype(np.float32)
        out["row"] = batch["row"].astype(np.int64)
        return out

    needs_model = True  # derived targets are the starting model's own words' vectors

    def prepare(self, inputs: StreamInputs) -> pa.Table | None:
        targets = inputs.static_targets()
        if targets is not None:
            self.require_batch_per_worker(
                len(targets),
                inputs,
                "data.static_vectors",
                f"{len(targets)} words",
                f"give more vectors, or a smaller {self.batch_size_key}",
            )
        return targets


@dataclass(frozen=True)
class SentencePairTokens:
    """The parallel stream: a translation pair as one sequence."""

    max_length: int
    languages: tuple[str, ...]  # a token's lang_ids is its side's language's index here


class ParallelSentencesStream(Stream):
    """Translation pairs read on the driver (``data.parallel``), each pair one sequence in the tokenizer's pair
    layout (``distalign.data.tokenize.encode_sentence_pairs``), with per-token languages and positions that
    restart on the second sentence: XLM's TLM input (Conneau & Lample 2019, §3.3)."""

    name = "parallel"
    doc = "translation pairs, both sentences in one sequence"
    default_batch_size = 16
    tensors = (
        TensorSpec("input_ids", "int64", "B,T"),
        TensorSpec("attention_mask", "int64", "B,T"),
        TensorSpec(
            "word_ids",
            "int64",
            "B,T",
            "word index over both sentences (the second's after the first's), -1 on specials/padding",
        ),
        TensorSpec("lang_ids", "int64", "B,T", "each token's sentence language's index in the run's languages"),
        TensorSpec(
            "positions", "int64", "B,T", "position in its own sentence (restarting on the second), 0 on padding"
        ),
        ROW,
        DRAW_EPOCH,
    )
    Settings = SentencePairTokens

    def settings(self, facts: RunFacts, languages: list[str]) -> SentencePairTokens:
        return SentencePairTokens(max_length=facts.max_seq_length, languages=tuple(languages))

    def tokenize(self, batch, tokenizer, settings: SentencePairTokens) -> dict[str, np.ndarray]:
        out = encode_sentence_pairs(tokenizer, batch["text1"].tolist(), batch["text2"].tolist(), settings.max_length)
        index = {lang: i for i, lang in enumerate(settings.languages)}
        side_langs = [
            np.array([index[lang] for lang in batch[key].tolist()], dtype=np.int64)[:, None]
            for key in ("lang1", "lang2")
        ]
        segment = out.pop("segment")
        out["lang_ids"] = np.where(segment == 1, side_langs[1], side_langs[0])  # padding: the first side's
        out["row"] = batch["row"].astype(np.int64)
        return out

    def prepare(self, inputs: StreamInputs) -> pa.Table:
        """``data.parallel``'s pairs; with ``objectives.tlm.parallel_share``, that share of the MLM corpus's sentences
        in the pairs' first language (``share_of_corpus``). The tiny model's tokenizer learns from every pair read."""
        config = inputs.config
        pairs = read_parallel(config.data.parallel, inputs.reports)
        inputs.tokenizer_texts += [
            text for column in ("text1", "text2") for text in pairs[column].to_pylist()[:TOKENIZER_SAMPLE]
        ]
        share = config.objectives.tlm.parallel_share
        kept = pairs if share is None else share_of_corpus(pairs, inputs.corpus, share, config.train.seed)
        self.require_batch_per_worker(
            len(kept),
            inputs,
            "data.parallel" if share is None else "objectives.tlm.parallel_share",
            f"{len(kept)} sentence pairs",
            f"give more pairs, or a smaller {self.batch_size_key}",
        )
        return kept


TOKENIZER_SAMPLE = 20000  # pairs of a stream the tiny model's tokenizer also learns from


def share_of_corpus(parallel: pa.Table, corpus: CorpusStream, share: float, seed: int) -> pa.Table:
    """``round(share x n)`` of the pairs, n the MLM corpus's sentences in the pairs' first language (ALIGN-MLM's
    "parallel data relative to MLM"), drawn with ``seed``."""
    lang = parallel["lang1"][0].as_py()
    sentences = sum(
        len(rows["row"])
        for rows in read_rows(CorpusStream([src for src in corpus.sources if src.lang == lang], corpus.filesystem))
    )
    wanted = round(share * sentences)
    if wanted > len(parallel):
        raise ConfigError(
            f"objectives.tlm.parallel_share: {share} of the {sentences} corpus sentences in {lang} is {wanted} "
            f"pairs; data.parallel has {len(parallel)}"
        )
    return parallel.take(np.random.default_rng(seed).permutation(len(parallel))[:wanted])


STREAMS: dict[str, Stream] = {
    stream.name: stream
    for stream in (ConstraintsStream(), CorpusSentencesStream(), StaticVectorsStream(), ParallelSentencesStream())
}


def epoch_stream(active: set[str]) -> str:
    """The stream whose passes ``train.epochs`` and ``eval.every_epochs`` count: the active one of lowest
    ``epoch_rank``; without one, the registered stream of highest rank (whose rows are then what there is)."""
    ranked = [s for s in STREAMS.values() if s.epoch_rank is not None]
    candidates = [s for s in ranked if s.name in active]
    if candidates:
        return min(candidates, key=lambda s: s.epoch_rank).name
    return max(ranked, key=lambda s: s.epoch_rank).name


def worker_data_cpus(active: set[str], data) -> float:
    """CPUs each worker's Ray Data tasks take for the ``active`` streams (a pool's CPUs counted once)."""
    pools = dict(STREAMS[name].cpus(data) for name in sorted(active))
    return sum(pools.values())


def check_batch(stream: str, batch: dict[str, np.ndarray], extra: tuple[TensorSpec, ...] = ()) -> None:
    """Raise unless ``batch`` holds exactly the stream's tensors plus ``extra`` (a preparer's), typed as declared."""
    specs = {t.name: t for t in STREAMS[stream].tensors + tuple(extra)}
    if set(batch) != set(specs):
        raise KeyError(f"stream '{stream}': batch has {sorted(batch)}, the contract says {sorted(specs)}")
    for name, spec in specs.items():
        spec.check(batch[name], stream)
