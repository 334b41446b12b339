"""The streams through Ray: a table stream's batches read and tokenised by Ray tasks from the table stored in the
run's storage, the same rows for the same seed; the corpus tokenised in the workers' item tasks."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import QUICKSTART, SMALL

from distalign.config import load_config
from distalign.data.corpus_stream import read_rows
from distalign.data.stream_plugins import STREAMS
from distalign.models.loading import load_tokenizer
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import (
    RayWorkerData,
    corpus_feed,
    local_streams,
    store_tables,
    table_streams,
)

pytestmark = pytest.mark.slow


def ray_batches(config, prepared, stream: str, rank: int, workers: int, count: int) -> list[dict]:
    """``count`` batches of worker ``rank``'s ``stream`` as a Ray Train worker reads them: Ray tasks over the stored
    table."""
    tables = table_streams(prepared, config, store_tables(prepared, config))
    batches = STREAMS[stream].worker_batches(
        RayWorkerData(rank, workers, None, tables), STREAMS[stream].batch_size(config.train)
    )
    return [next(batches) for _ in range(count)]


def test_streams_are_tokenised_and_reproducible(ray_local, distalign_home):
    config = load_config(QUICKSTART, SMALL + ["run.name=pipeline", "data.pack_sequences=false"])  # a sentence a row
    prepared = prepare_data(config)

    batch = next(STREAMS["corpus"].worker_batches(RayWorkerData(0, 2, corpus_feed(prepared, config)), 8))
    texts = {key: text for rows in read_rows(prepared.corpus) for key, text in zip(rows["row"], rows["text"])}
    tokenizer = load_tokenizer(prepared.model_path)
    first_text = texts[int(batch["row"][0])]
    expected = tokenizer(first_text.split(), is_split_into_words=True)["input_ids"]
    assert batch["input_ids"][0, : len(expected)].tolist() == expected
    assert batch["input_ids"].shape == (8, config.data.max_seq_length)

    first = ray_batches(config, prepared, "constraints", 1, 2, 3)
    assert set(first[0]) >= {"input_ids1", "word_mask1", "input_ids2", "synset", "row", "epoch"}
    local = local_streams(prepared, config, rank=1, workers=2)["constraints"]  # the same rows without Ray
    for batch in first:
        assert all(np.array_equal(batch[key].numpy(), value.numpy()) for key, value in next(local).items())
    again = ray_batches(config, prepare_data(config), "constraints", 1, 2, 3)
    assert all(np.array_equal(a["input_ids1"], b["input_ids1"]) for a, b in zip(first, again))
    other_seed = load_config(QUICKSTART, SMALL + ["run.name=pipeline-seed1", "train.seed=1"])
    reshuffled = ray_batches(other_seed, prepare_data(other_seed), "constraints", 1, 2, 3)
    assert not all(
        np.array_equal(a["row"], b["row"]) and np.array_equal(a["synset"], b["synset"])
        for a, b in zip(first, reshuffled)
    )


def test_packed_corpus_sequences_through_ray_data(ray_local, distalign_home):
    """data.pack_sequences in the workers' Ray Data stream: fewer, fuller rows, each starting with its row's
    sentence and masked by the MLM's preparer."""
    config = load_config(QUICKSTART, SMALL + ["run.name=pipeline-packed", "objectives.lexical.weight=0"])
    prepared = prepare_data(config)
    stream = STREAMS["corpus"].worker_batches(RayWorkerData(0, 2, corpus_feed(prepared, config)), 8)
    batches = [next(stream) for _ in range(3)]
    texts = {key: text for rows in read_rows(prepared.corpus) for key, text in zip(rows["row"], rows["text"])}
    tokenizer = load_tokenizer(prepared.model_path)
    first = tokenizer(texts[int(batches[0]["row"][0])].split(), is_split_into_words=True, add_special_tokens=False)[
        "input_ids"
    ]
    assert batches[0]["input_ids"][0, 1 : 1 + len(first)].tolist() == first
    assert np.mean([b["attention_mask"].float().mean().item() for b in batches]) > 0.5
    assert all((b["labels"] != -100).any() for b in batches)
