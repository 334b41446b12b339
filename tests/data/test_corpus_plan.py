"""The corpus work split (``distalign.data.corpus_plan``) and a worker's corpus batches (``CorpusBatches``),
without Ray or files: units dealt so that each is read by one worker, in balance, even with file sizes 100x
apart; a resume on as many workers continues with exactly the batches of the uninterrupted run, and on
another number of workers finishes the epoch with no row trained twice and none skipped."""

from __future__ import annotations

import numpy as np
import pytest

from distalign.data.corpus_plan import Item, Position, Units, byte_ranges, cut_units, deal, dealt, resume_items, within
from distalign.data.ragged import RaggedRows
from distalign.data.stream_plugins import STREAMS, take_rows

MB = 2**20


def test_byte_ranges_cover_the_file_in_equal_parts():
    assert byte_ranges(10, 4) == [(0, 3), (3, 7), (7, 10)]
    assert byte_ranges(0, 4) == [(0, 0)]
    ranges = byte_ranges(100 * MB + 7, MB)
    assert ranges[0][0] == 0 and ranges[-1][1] == 100 * MB + 7 and len(ranges) == 101
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 8])
def test_each_unit_goes_to_one_worker_and_bytes_differ_by_at_most_one_unit(workers):
    """Files of 1 MB and 100 MB (and a parquet file of uneven row groups): every unit read once per epoch, each
    worker's bytes within one unit (1 MB) of every other's."""
    sizes = [1 * MB, 100 * MB, 3 * MB, 50 * MB + 123]
    units = Units.concat(
        [
            cut_units(0, "text", [f"f{i}.txt" for i in range(4)], sizes, [[]] * 4, MB),
            cut_units(1, "parquet", ["g.parquet"], [0], [[MB // 2, MB, MB // 4]], MB),
        ]
    )

    def assign(units, seed, epoch, workers):
        return [units.take(mine) for mine in dealt(units, seed, epoch, workers)]

    for epoch in (0, 1):
        shares = assign(units, seed=3, epoch=epoch, workers=workers)
        assert sorted((u.source, u.path, u.start) for mine in shares for u in mine) == sorted(
            (u.source, u.path, u.start) for u in units
        )
        totals = [sum(u.size for u in mine) for mine in shares]
        assert max(totals) - min(totals) <= max(u.size for u in units)
        assert max(totals) / (sum(totals) / workers) < 1 + workers * MB / sum(totals) + 1e-9
    assert assign(units, 3, 0, workers) == assign(units, 3, 0, workers)
    if workers > 1:
        assert assign(units, 3, 0, workers) != assign(units, 3, 1, workers)  # a new deal every epoch


class FakeData:
    """A ``WorkerData`` whose units' sequences are the numbers ``1000 * unit + i`` (i < unit size), shuffled per
    item as the real reader shuffles them (by the item alone), with their epoch, in blocks of 3 (the real reader
    yields an item a chunk at a time). ``ahead``: the next item asked for before the one being read is given, as
    ``RayWorkerData`` does (two items submitted at once). ``asked``: the epoch of each item asked for."""

    def __init__(self, units, rank, workers, mix_units=2, ahead=False):
        self.units, self.rank, self.workers, self.mix_units, self.ahead = units, rank, workers, mix_units, ahead
        self.number = {u: n for n, u in enumerate(units)}
        self.asked: list[int] = []

    def corpus_units(self):
        return self.units, 7, self.mix_units

    def corpus_items(self, items):
        asked = self._logged(items)
        for index, item in enumerate(self._one_ahead(asked) if self.ahead else asked):
            rows = np.array([1000 * self.number[u] + i for u in item.units for i in range(u.size)], dtype=np.int64)
            rows = np.random.default_rng([item.epoch, int(rows[0])]).permutation(rows)[item.skip :]
            for start in range(0, len(rows), 3):
                block = rows[start : start + 3]
                yield RaggedRows.of_columns(
                    {"row": block, "epoch": np.full(len(block), item.epoch), "item": np.full(len(block), index)}
                )

    def _logged(self, items):
        for item in items:
            self.asked.append(item.epoch)
            yield item

    @staticmethod
    def _one_ahead(items):
        """Each item given once the one after it has been asked for."""
        current = next(items)
        for following in items:
            yield current
            current = following
        yield current


# a unit of 33 sequences and 30 of 10: on 2 workers 163 and 170 sequences an epoch
UNITS = Units.concat(
    [cut_units(0, "text", ["a.txt"], [33], [[]], 40), cut_units(0, "text", ["b.txt"], [300], [[]], 10)]
)


def corpus_batches(rank, workers, saved=None, ahead=False):
    return STREAMS["corpus"].worker_batches(FakeData(UNITS, rank, workers, ahead=ahead), 4, saved)


def take(stream, count):
    return [next(stream) for _ in range(count)]


def epoch_rows(batches, epoch):
    return [int(r) for b in batches for r, e in zip(b["row"], b["epoch"]) if e == epoch]


@pytest.mark.parametrize("ahead", [False, True])
def test_a_resume_on_as_many_workers_gives_the_batches_of_the_uninterrupted_run(ahead):
    """``ahead``: the saved workers had read the next epoch's first items ahead (dealt, in their states)."""
    for rank in range(3):
        whole = take(corpus_batches(rank, 3), 40)  # past the first epoch (about 28 batches a worker)
        first = corpus_batches(rank, 3, ahead=ahead)
        take(first, 13 + 14 * ahead)  # with read-ahead, to just before the epoch's end
        saved = [corpus_batches(r, 3, ahead=ahead) for r in range(3)]
        for r, stream in enumerate(saved):
            take(stream, 13 + 14 * ahead) if r != rank else None
        states = [s.state() if r != rank else first.state() for r, s in enumerate(saved)]
        resumed = take(corpus_batches(rank, 3, states), 27 - 14 * ahead)
        for a, b in zip(whole[13 + 14 * ahead :], resumed):
            assert a["row"].tolist() == b["row"].tolist() and a["epoch"].tolist() == b["epoch"].tolist()


@pytest.mark.parametrize("ahead", [False, True])
@pytest.mark.parametrize("before,after,steps", [(4, 2, 5), (2, 3, 41), (3, 1, 2), (4, 2, 0), (2, 3, 38)])
def test_an_elastic_resume_finishes_the_epoch_with_no_row_twice_and_none_skipped(before, after, steps, ahead):
    """``before`` workers train ``steps`` batches each (after 41 on 2 workers one is into epoch 1, its epoch being
    smaller, the other not), then ``after`` workers resume from their states and read on until each is past epoch 0;
    epoch 0's rows over both runs are every row once."""
    old = [corpus_batches(r, before, ahead=ahead) for r in range(before)]
    trained = [b for stream in old for b in take(stream, steps)]
    states = [stream.state() for stream in old]
    for rank in range(after):
        stream = corpus_batches(rank, after, states)
        while True:
            batch = next(stream)
            trained.append(batch)
            if (batch["epoch"] > 0).any():
                break
    everything = sorted(1000 * n + i for n, u in enumerate(UNITS) for i in range(u.size))
    assert sorted(epoch_rows(trained, 0)) == everything
    if (before, steps, ahead) == (2, 41, False):
        assert sorted(p["next_epoch"] for p in states) == [1, 2]  # one saved worker was already in epoch 1
    if (before, steps, ahead) == (2, 38, True):  # one saved worker had dealt epoch 1 ahead, still in epoch 0
        assert [sorted({i["epoch"] for i in p["items"]}) for p in states] == [[0, 1], [0]]


def test_positions_round_trip_and_resume_on_as_many_workers_is_the_saved_position():
    units = UNITS[:3]
    position = Position([Item(0, tuple(units[:2]), skip=3)], 1, 2)
    assert Position.from_json(position.to_json()) == position
    other = Position([], 1, 2)
    assert resume_items(units, 0, 2, [position, other], 0, 2) is position


def test_a_resume_leaves_out_units_of_files_that_changed_since_the_checkpoint():
    """Units no longer in the listing are left out (a begun item that lost one whole): rows skipped, never repeated."""
    a, b, c = UNITS[0], UNITS[1], UNITS[2]
    saved = Position([Item(0, (a, b), skip=5), Item(0, (b, c)), Item(0, (c,), skip=2)], 1, 2)
    kept, gone = within(saved, Units.of([u for u in UNITS if u != b]))
    assert kept == Position([Item(0, (c,)), Item(0, (c,), skip=2)], 1, 2)
    assert gone == ["b.txt"]
    assert within(saved, UNITS) == (saved, [])


def test_take_rows_takes_across_blocks_and_leaves_the_rest():
    pending = [
        RaggedRows.of_columns({"row": np.arange(3), "x": np.arange(6).reshape(3, 2)}),
        RaggedRows.of_columns({"row": np.arange(3, 8), "x": np.zeros((5, 2))}),
    ]
    first = take_rows(pending, 4)
    assert first["row"].tolist() == [0, 1, 2, 3] and first["x"].shape == (4, 2) and first["row"].flags.writeable
    assert len(pending) == 1 and pending[0]["row"].tolist() == [4, 5, 6, 7]
    assert take_rows(pending, 4)["row"].tolist() == [4, 5, 6, 7] and pending == []


def test_take_rows_of_unpadded_blocks_keeps_each_row_s_tokens():
    lengths = [[2, 3, 1], [4, 2]]
    blocks = [
        {
            "ids": np.where(np.arange(6)[None] < np.array(ls)[:, None], np.arange(6)[None] + 10 * r, -1),
            "row": np.arange(len(ls)) + 3 * r,
        }
        for r, ls in enumerate(lengths)
    ]
    pending = [RaggedRows.from_padded(block, {"ids"}) for block in blocks]
    batch = take_rows(pending, 4)
    assert batch.lengths.tolist() == [2, 3, 1, 4] and len(pending[0]) == 1
    np.testing.assert_array_equal(batch.padded(6)["ids"], np.concatenate([blocks[0]["ids"], blocks[1]["ids"][:1]]))
    np.testing.assert_array_equal(take_rows(pending, 1)["ids"], blocks[1]["ids"][1:])


def linear_scan_deal(sizes: list[int], order: np.ndarray, workers: int) -> list[list[int]]:
    """The deal as it was before the heap (O(U·W)): the oracle the heap must match exactly."""
    totals, out = [0] * workers, [[] for _ in range(workers)]
    for index in order.tolist():
        worker = min(range(workers), key=lambda w: (totals[w], w))
        totals[worker] += sizes[index]
        out[worker].append(index)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_the_heap_deal_matches_the_linear_scan_on_random_inputs(seed):
    rng = np.random.default_rng(seed)
    units, workers = int(rng.integers(0, 3000)), int(rng.integers(1, 130))
    high = [2, 50, 4 * MB][seed % 3]  # small sizes: many ties between workers' totals
    sizes = rng.integers(0 if seed % 2 else 1, high, units).tolist()
    order = rng.permutation(units)
    assert deal(sizes, order, workers) == linear_scan_deal(sizes, order, workers)


def python_byte_ranges(size: int, step: int) -> list[tuple[int, int]]:
    """The cut as it was before the columns (Python ints): the oracle a checkpoint's units were made by."""
    count = max(1, -(-size // step))
    bounds = [round(i * size / count) for i in range(count + 1)]
    return list(zip(bounds[:-1], bounds[1:]))


@pytest.mark.parametrize("seed", range(4))
def test_the_vectorised_cut_matches_the_python_cut(seed):
    """Byte ranges of files up to 1 TB (float64 holds i * size exactly there) are those of the Python cut, so the
    units of a checkpoint written before the columns are still units of the listing."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, [10**4, 10**8, 10**12, 7 * MB][seed], 300).tolist()
    step = max(1, max(sizes) // int(rng.integers(2, 60)))
    units = cut_units(2, "text", [f"f{i}.txt" for i in range(300)], sizes, [[]] * 300, step)
    expected = [(f"f{i}.txt", s, e) for i, n in enumerate(sizes) for s, e in python_byte_ranges(n, step) if e > s]
    assert [(u.path, u.start, u.end) for u in units] == expected
    assert all(u.size == u.end - u.start and u.listed == sizes[u.file] and u.source == 2 for u in units)


def test_the_next_epoch_s_first_item_is_read_ahead_before_the_epoch_ends():
    """The reader is asked for epoch 1's first item while epoch 0's last item is still being read (before the
    issue-47 fix each epoch was handed to the reader alone, so it paused at every epoch's first item)."""
    data = FakeData(UNITS, 0, 2, ahead=True)
    stream = STREAMS["corpus"].worker_batches(data, 4)
    while True:
        batch = next(stream)
        if (batch["epoch"] == 0).all() and 1 in data.asked:
            break  # epoch 1 asked for, epoch 0 still training
        assert not (batch["epoch"] > 0).any(), "epoch 1 reached before its first item was asked for ahead"


class SilentData(FakeData):
    """Every file gone after epoch 0: its items yield nothing."""

    def corpus_items(self, items):
        return (block for block in super().corpus_items(items) if (block.columns["epoch"] == 0).all())


def test_a_worker_whose_epoch_yields_nothing_stops_with_a_message():
    stream = STREAMS["corpus"].worker_batches(SilentData(UNITS, 0, 2), 4)
    with pytest.raises(ValueError, match="worker 0 of 2 got no sentence in epoch 1"):
        for _ in range(200):
            next(stream)
