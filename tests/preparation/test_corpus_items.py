"""A corpus item comes a chunk at a time: its first block after one chunk is tokenised, not the whole item; the
chunks change neither its sequences, nor their order, nor their masks; ``skip`` drops the sequences already trained
(in this process, no Ray)."""

from __future__ import annotations

import dataclasses

import numpy as np
from conftest import QUICKSTART, SMALL

from distalign.config import load_config
from distalign.data.corpus_plan import Item
from distalign.data.corpus_stream import SkipLedger, read_unit, row_keys
from distalign.preparation import ray_streams
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import corpus_feed, item_blocks, row_chunks

CHUNK = 32  # TOKENIZE_BATCH here: an item of ~300 sentences in 10 chunks


def feed_and_item(pack: bool, monkeypatch):
    """The quickstart's corpus feed (9 units of ~100 sentences), an item of one unit of each of its 3 languages,
    and the sizes of the chunks that item_blocks tokenises (appended as it does)."""
    config = load_config(
        QUICKSTART, SMALL + [f"run.name=items-{pack}", "objectives.lexical.weight=0", f"data.pack_sequences={pack}"]
    )
    feed = corpus_feed(prepare_data(config), config)
    tokenised, build = [], ray_streams.build_stream_batch
    monkeypatch.setattr(ray_streams, "TOKENIZE_BATCH", CHUNK)
    monkeypatch.setattr(
        ray_streams, "build_stream_batch", lambda rows, job: tokenised.append(len(rows["row"])) or build(rows, job)
    )
    return feed, Item(1, tuple(feed.corpus.units()[::3])), tokenised


def unit_rows(feed, item):
    return [read_unit(feed.corpus, unit, item.epoch, feed.seed, SkipLedger()) for unit in item.units]


def joined(blocks):
    """The blocks' rows padded back to the stream's width (they leave the item task unpadded)."""
    blocks = [block.padded(block.width) for block in blocks]
    return {k: np.concatenate([b[k] for b in blocks]) for k in blocks[0]}


def assert_same(got, expected):
    assert set(got) == set(expected)
    for k in expected:
        np.testing.assert_array_equal(got[k], expected[k], err_msg=k)


def test_an_item_comes_a_chunk_at_a_time_shuffled_by_its_own_seed(distalign_home, monkeypatch):
    feed, item, tokenised = feed_and_item(False, monkeypatch)
    blocks = item_blocks(item, 5, feed.corpus, feed.job)
    first = next(blocks)
    assert tokenised == [CHUNK] and len(first["row"]) == CHUNK  # one chunk tokenised, not the item's ~300 rows
    got = joined([first, *blocks])

    # as the whole item read, tokenised and masked at once, then shuffled by (run seed, epoch, its first unit)
    rows = {k: np.concatenate([u[k] for u in unit_rows(feed, item)]) for k in ("text", "lang", "row", "epoch")}
    whole = ray_streams.build_stream_batch(rows, feed.job)
    start = item.units[0]
    seed = int(row_keys("", feed.corpus.place(start), [start.start])[0])
    order = np.random.default_rng([feed.seed, item.epoch, seed]).permutation(len(rows["row"]))
    assert len(order) > 6 * CHUNK and len(set(rows["lang"])) == 3
    assert_same(got, {**{k: v[order] for k, v in whole.items()}, "item": np.full(len(order), 5)})

    tokenised.clear()
    resumed = joined(item_blocks(dataclasses.replace(item, skip=40), 5, feed.corpus, feed.job))
    assert_same(resumed, {k: v[40:] for k, v in got.items()})
    assert sum(tokenised) == len(order) - 40  # the sequences trained are not tokenised again


def test_a_packed_item_comes_in_rounds_that_mix_all_its_units(distalign_home, monkeypatch):
    feed, item, tokenised = feed_and_item(True, monkeypatch)
    blocks = item_blocks(item, 0, feed.corpus, feed.job)
    first = next(blocks)
    assert tokenised == [CHUNK] * 3 and set(first["lang_id"].tolist()) == {0, 1, 2}  # every unit's first chunk
    got = joined([first, *blocks])

    # the sequences of each unit packed a chunk at a time, each once, in an order drawn from the item alone
    packed = [
        ray_streams.build_stream_batch(chunk, feed.job)
        for rows in unit_rows(feed, item)
        for chunk in row_chunks([rows], CHUNK)
    ]
    expected = {
        int(row): (ids.tolist(), labels.tolist())
        for p in packed
        for row, ids, labels in zip(p["row"], p["input_ids"], p["labels"])
    }
    assert len(got["row"]) == len(expected) and len(expected) < sum(tokenised)  # packed: fewer than sentences
    assert {
        int(row): (ids.tolist(), labels.tolist())
        for row, ids, labels in zip(got["row"], got["input_ids"], got["labels"])
    } == expected
    assert_same(joined(item_blocks(item, 0, feed.corpus, feed.job)), got)

    skip = len(first["row"]) + 3  # into the second round
    assert_same(
        joined(item_blocks(dataclasses.replace(item, skip=skip), 0, feed.corpus, feed.job)),
        {k: v[skip:] for k, v in got.items()},
    )
