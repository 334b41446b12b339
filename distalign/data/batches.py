"""The batch contract: which tensors each training stream's batches carry, in one place.

A stream is a kind of training rows (word pairs, corpus sentences, words with static vectors); each
worker reads its own share of it (``distalign.preparation.streams``: a dataset per worker of a table
stream, a lazy per-epoch dataset per worker of the corpus). The data pipeline tokenises its rows into
the ``tensors`` below; an objective that transforms a stream on the data
side (masking) adds the tensors it declares in ``Objective.prepares``; an objective
declares the names it reads (``Objective.consumes``). ``tests/data/test_batch_contract.py`` checks
every objective's reads against this table and the table against what the pipeline really makes.

Shapes: ``B`` rows, ``T`` tokens (a stream's fixed padded width), ``D`` static vector dimension.
Every stream carries ``row``, the row's position in its epoch: with the epoch and the run seed it
seeds the row's data-side randomness (``distalign.data.row_random``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
            raise TypeError(f"stream '{stream}', tensor '{self.name}': expected {self.dtype}[{self.shape}], got "
                            f"{array.dtype} with {array.ndim} dimensions")


@dataclass(frozen=True)
class StreamSpec:
    name: str
    batch_size_key: str  # the train.* field giving this stream's rows per worker per step
    doc: str
    tensors: tuple[TensorSpec, ...]

    @property
    def names(self) -> set[str]:
        return {t.name for t in self.tensors}

    def batch_size(self, train_config) -> int:
        return getattr(train_config, self.batch_size_key.removeprefix("train."))


def _word_pair_side(side: str) -> tuple[TensorSpec, ...]:
    return (
        TensorSpec(f"input_ids{side}", "int64", "B,T", f"word {side} alone ([CLS] w [SEP]) or with its gloss"),
        TensorSpec(f"attention_mask{side}", "int64", "B,T"),
        TensorSpec(f"word_mask{side}", "int64", "B,T", "1 on the word's own subword tokens"),
        TensorSpec(f"gloss_mask{side}", "int64", "B,T", "1 on the gloss's tokens (all 0 without glosses)"),
    )


ROW = TensorSpec("row", "int64", "B", "position of the row in its epoch")

STREAMS: dict[str, StreamSpec] = {
    "constraints": StreamSpec(
        "constraints", "train.constraint_batch_size",
        "word pairs (lexical constraints / dictionary entries), each word encoded on its own",
        _word_pair_side("1") + _word_pair_side("2") + (
            TensorSpec("synset", "int64", "B", "dense synset label of the pair"), ROW)),
    "corpus": StreamSpec(
        "corpus", "train.corpus_batch_size", "corpus sentences, whitespace words split into subwords",
        (TensorSpec("input_ids", "int64", "B,T"), TensorSpec("attention_mask", "int64", "B,T"),
         TensorSpec("word_ids", "int64", "B,T", "each token's word index in its sentence, -1 on specials/padding"),
         TensorSpec("lang_id", "int64", "B", "the sentence language's index in the run's languages"), ROW)),
    "static": StreamSpec(
        "static", "train.static_batch_size", "words with their fixed static vectors",
        (TensorSpec("input_ids", "int64", "B,T"), TensorSpec("attention_mask", "int64", "B,T"),
         TensorSpec("word_mask", "int64", "B,T"), TensorSpec("vector", "float32", "B,D"), ROW)),
}


def check_batch(stream: str, batch: dict[str, np.ndarray], extra: tuple[TensorSpec, ...] = ()) -> None:
    """Raise unless ``batch`` holds exactly the stream's tensors plus ``extra`` (a preparer's), typed as declared."""
    specs = {t.name: t for t in STREAMS[stream].tensors + tuple(extra)}
    if set(batch) != set(specs):
        raise KeyError(f"stream '{stream}': batch has {sorted(batch)}, the contract says {sorted(specs)}")
    for name, spec in specs.items():
        spec.check(batch[name], stream)
