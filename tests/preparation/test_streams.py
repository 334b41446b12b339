"""Ray Data streams: tokenised in map_batches, equal shards per worker, the same for the same seed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import QUICKSTART, SMALL
from distalign.config import load_config
from distalign.preparation.streams import build_datasets
from distalign.preparation.inputs import prepare_data
from distalign.models.loading import load_tokenizer

pytestmark = pytest.mark.slow


def shard_rows(dataset, workers: int, column: str) -> list[list[tuple]]:
    """Read every shard of an equal streaming split; consumers must read at the same time, as workers do."""
    shards = dataset.streaming_split(workers, equal=True)

    def read(shard) -> list[tuple]:
        return [tuple(row) for batch in shard.iter_batches(batch_size=64, batch_format="numpy") for row in batch[column]]

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(read, shards))


def test_streams_are_tokenised_equal_and_reproducible(ray_local, distalign_home):
    config = load_config(QUICKSTART, SMALL + ["run.name=pipeline"])
    prepared = prepare_data(config)
    datasets = build_datasets(prepared, config)
    assert set(datasets) == {"constraints", "corpus"}

    corpus = datasets["corpus"].take(2)
    tokenizer = load_tokenizer(prepared.model_path)
    first_text = prepared.corpus["text"][0].as_py()
    expected = tokenizer(first_text.split(), is_split_into_words=True)["input_ids"]
    assert corpus[0]["input_ids"][: len(expected)].tolist() == expected
    assert corpus[0]["input_ids"].shape == (config.data.max_seq_length,)
    assert set(datasets["constraints"].take(1)[0]) >= {"input_ids1", "word_mask1", "input_ids2", "synset"}

    first = shard_rows(datasets["constraints"], 2, "input_ids1")
    assert len(first[0]) == len(first[1]) == len(prepared.constraints) // 2
    again = shard_rows(build_datasets(prepare_data(config), config)["constraints"], 2, "input_ids1")
    assert first == again
    other_seed = load_config(QUICKSTART, SMALL + ["run.name=pipeline-seed1", "train.seed=1"])
    reshuffled = shard_rows(build_datasets(prepare_data(other_seed), other_seed)["constraints"], 2, "input_ids1")
    assert reshuffled[0] != first[0]
