"""Ray Data streams: tokenised in map_batches, equal shards per worker, the same for the same seed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import QUICKSTART, SMALL

from distalign.config import load_config
from distalign.data.corpus_stream import read_rows
from distalign.data.streams import STREAMS
from distalign.models.loading import load_tokenizer
from distalign.preparation.inputs import prepare_data
from distalign.preparation.streams import RayWorkerData, build_datasets, corpus_feed, shard_name

pytestmark = pytest.mark.slow


def shard_rows(datasets, stream: str, workers: int, column: str) -> list[list]:
    """Every worker's rows of a stream (each worker has a dataset of its own)."""
    def read(rank: int) -> list:
        dataset = datasets[shard_name(stream, rank)]
        return [np.asarray(row).tolist() for batch in dataset.iter_batches(batch_size=64, batch_format="numpy")
                for row in batch[column]]

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(read, range(workers)))


def test_streams_are_tokenised_equal_and_reproducible(ray_local, distalign_home):
    config = load_config(QUICKSTART, SMALL + ["run.name=pipeline"])
    prepared = prepare_data(config)
    datasets = build_datasets(prepared, config, config.train.max_steps)
    assert set(datasets) == {shard_name("constraints", r) for r in (0, 1)}  # the corpus streams on the workers

    batch = next(STREAMS["corpus"].worker_batches(RayWorkerData(0, 2, corpus_feed(prepared, config)), 8))
    texts = {key: text for rows in read_rows(prepared.corpus) for key, text in zip(rows["row"], rows["text"])}
    tokenizer = load_tokenizer(prepared.model_path)
    first_text = texts[int(batch["row"][0])]
    expected = tokenizer(first_text.split(), is_split_into_words=True)["input_ids"]
    assert batch["input_ids"][0, : len(expected)].tolist() == expected
    assert batch["input_ids"].shape == (8, config.data.max_seq_length)
    assert set(datasets[shard_name("constraints", 0)].take(1)[0]) >= {"input_ids1", "word_mask1", "input_ids2",
                                                                      "synset"}

    first = shard_rows(datasets, "constraints", 2, "input_ids1")
    assert len(first[0]) == len(first[1]) >= len(prepared.constraints) // 2
    again = shard_rows(build_datasets(prepare_data(config), config, config.train.max_steps), "constraints", 2, "input_ids1")
    assert first == again
    other_seed = load_config(QUICKSTART, SMALL + ["run.name=pipeline-seed1", "train.seed=1"])
    reshuffled = shard_rows(build_datasets(prepare_data(other_seed), other_seed, other_seed.train.max_steps), "constraints", 2, "input_ids1")
    assert reshuffled[0] != first[0]


def test_workers_read_different_rows_at_every_step_across_epochs(ray_local, distalign_home):
    """Worker r reads rows r, r + W, ... of every epoch: never the rows another worker reads (a split of
    per-epoch datasets once gave every worker a whole epoch of its own, in the same order)."""
    config = load_config(QUICKSTART, SMALL + ["run.name=pipeline-epochs", "train.max_steps=80"])
    prepared = prepare_data(config)
    first, second = shard_rows(build_datasets(prepared, config, config.train.max_steps), "constraints", 2, "row")
    per_epoch = len(prepared.constraints) // 2
    assert len(first) == len(second) >= 2 * per_epoch  # at least two epochs of rows each
    assert first[:per_epoch] == list(range(0, 2 * per_epoch, 2))
    assert second[:per_epoch] == list(range(1, 2 * per_epoch, 2))


def test_packed_corpus_sequences_through_ray_data(ray_local, distalign_home):
    """data.pack_sequences in the workers' Ray Data stream: fewer, fuller rows, each starting with its row's
    sentence and masked by the MLM's preparer."""
    config = load_config(QUICKSTART, SMALL + ["run.name=pipeline-packed", "data.pack_sequences=true",
                                              "objectives.lexical.weight=0"])
    prepared = prepare_data(config)
    stream = STREAMS["corpus"].worker_batches(RayWorkerData(0, 2, corpus_feed(prepared, config)), 8)
    batches = [next(stream) for _ in range(3)]
    texts = {key: text for rows in read_rows(prepared.corpus) for key, text in zip(rows["row"], rows["text"])}
    tokenizer = load_tokenizer(prepared.model_path)
    first = tokenizer(texts[int(batches[0]["row"][0])].split(), is_split_into_words=True,
                      add_special_tokens=False)["input_ids"]
    assert batches[0]["input_ids"][0, 1: 1 + len(first)].tolist() == first
    assert np.mean([b["attention_mask"].float().mean().item() for b in batches]) > 0.5
    assert all((b["labels"] != -100).any() for b in batches)
