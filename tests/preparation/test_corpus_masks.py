"""Masks of corpus rows do not depend on the number of workers: every row of an epoch, dealt to 1 or 3 workers,
is read by one of them and comes out with the same masked tokens and labels (in this process, no Ray)."""

from __future__ import annotations

import pytest
from conftest import QUICKSTART, SMALL

from distalign.config import load_config
from distalign.data.corpus_plan import fresh_items
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import LocalWorkerData, corpus_feed


def masked_rows(feed, workers: int) -> dict[int, tuple]:
    out: dict[int, tuple] = {}
    for rank in range(workers):
        items = fresh_items(feed.corpus.units(), feed.seed, 0, workers, rank, feed.mix_units)
        for block in LocalWorkerData({}, feed, rank, workers).corpus_items(items):
            for row, ids, labels in zip(block["row"], block["input_ids"], block["labels"]):
                assert int(row) not in out  # read by one worker only
                out[int(row)] = (tuple(ids.tolist()), tuple(labels.tolist()))
    return out


@pytest.mark.parametrize("pack", [False, True])
def test_masks_are_the_same_on_one_and_on_three_workers(distalign_home, pack):
    """Packed (the default), sentences are packed within a unit: the same sequences on any number of workers."""
    config = load_config(
        QUICKSTART, SMALL + ["run.name=masks", "objectives.lexical.weight=0", f"data.pack_sequences={pack}"]
    )
    prepared = prepare_data(config)
    feed = corpus_feed(prepared, config)
    one, three = masked_rows(feed, 1), masked_rows(feed, 3)
    assert (len(one) < prepared.corpus_rows / 2 if pack else len(one) == prepared.corpus_rows) and one == three
    assert sum(any(label != -100 for label in labels) for _, labels in one.values()) > 0.3 * len(
        one
    )  # 15 % of words, short sentences
