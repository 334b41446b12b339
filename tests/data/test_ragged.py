"""``RaggedRows``: padded blocks kept unpadded and int32, and padded back exactly, a batch at a time."""

from __future__ import annotations

import numpy as np
import pytest

from distalign.data.ragged import RaggedRows

PAD = 1


def block(lengths: list[int], width: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    """A corpus-like block: ids padded with PAD, a mask, word ids -1 on padding, labels -100 there, and a
    per-row language that pads with the row's own value (DICT-MLM's ``lang_ids``)."""
    rng = np.random.default_rng(seed)
    used = np.arange(width)[None, :] < np.array(lengths)[:, None]
    ids = np.where(used, rng.integers(5, 250_000, (len(lengths), width)), PAD)
    langs = rng.integers(0, 3, len(lengths))
    return {
        "input_ids": ids,
        "attention_mask": used.astype(np.int64),
        "word_ids": np.where(used, np.cumsum(used, 1) - 1, -1),
        "labels": np.where(used & (rng.random(ids.shape) < 0.3), ids, -100),
        "lang_ids": np.repeat(langs[:, None], width, 1),
        "row": rng.integers(0, 2**62, len(lengths)),
        "vector": rng.random((len(lengths), 3)).astype(np.float32),
    }


PADDED = {"input_ids", "attention_mask", "word_ids", "labels", "lang_ids"}


def assert_same(got: dict, expected: dict) -> None:
    assert set(got) == set(expected)
    for name in expected:
        assert got[name].dtype == expected[name].dtype, name
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_padding_back_to_the_width_gives_the_block_exactly_and_int32_unpadded_in_between():
    original = block([3, 8, 1, 5])
    rows = RaggedRows.from_padded(original, PADDED)
    # a full row's last column is its own fill: 7 positions kept
    assert rows.lengths.tolist() == [3, 7, 1, 5] and rows.width == 8
    assert all(values.dtype == np.int32 and len(values) == 16 for values in rows.tokens.values())
    assert_same(rows.padded(8), original)
    columns = original["row"].nbytes + original["vector"].nbytes
    assert rows.nbytes - columns < sum(original[name].nbytes for name in PADDED) / 2.5  # int32, 16 of 32 positions


def test_a_narrower_width_is_the_block_cut_to_it_and_rows_slice_and_join():
    original = block([3, 6, 1, 5], width=12)
    rows = RaggedRows.from_padded(original, PADDED)
    assert_same(rows.padded(), {k: v[:, :6] if k in PADDED else v for k, v in original.items()})
    joined = RaggedRows.concat([rows.rows(0, 1), rows.rows(1, 3), rows.rows(3, 4)])
    assert_same(joined.padded(7), {k: v[:, :7] if k in PADDED else v for k, v in original.items()})
    assert_same(rows.rows(1, 3).padded(12), {k: v[1:3] for k, v in original.items()})
    with pytest.raises(ValueError, match=r"width 5 outside \[6, 12\]"):
        rows.padded(5)


def test_a_tensor_whose_padding_is_not_its_fill_keeps_those_positions():
    """DICT-MLM's spliced rows may end before the original ids do: a row is kept as far as any tensor has
    something other than its fill, so nothing is lost whichever tensor ends last."""
    original = block([2, 4])
    original["input_ids"][0, 5] = 77  # beyond the row's attention
    rows = RaggedRows.from_padded(original, PADDED)
    assert rows.lengths.tolist() == [6, 4]
    assert_same(rows.padded(8), original)


def test_values_beyond_int32_are_refused():
    original = block([2, 3])
    original["row"] = original["row"]  # a B column may hold any int64
    RaggedRows.from_padded(original, PADDED)
    original["input_ids"][0, 0] = 2**40
    with pytest.raises(ValueError, match="'input_ids'.*int32"):
        RaggedRows.from_padded(original, PADDED)


@pytest.mark.parametrize("lengths", [[3, 70, 12], [5, 9], [200, 1]])
def test_a_collated_batch_trims_to_the_batch_a_padded_one_trimmed_to(lengths):
    """The worker pads a batch to its longest row rounded up to 64 (``collated_width``): the training loop's trim
    (to a multiple of 8 on CUDA, of 1 on CPU) then gives what the batch padded to the stream's width gave."""
    import torch

    from distalign.data.batches import trim_padding
    from distalign.data.stream_plugins import collated_width

    original = block(lengths, width=256)
    rows = RaggedRows.from_padded(original, PADDED)
    collated = rows.padded(collated_width(rows))
    assert collated["input_ids"].shape[1] == min(256, -(-max(lengths) // 64) * 64)
    for multiple in (1, 8, 64):
        old = trim_padding({k: torch.from_numpy(v) for k, v in original.items()}, PADDED, multiple)
        new = trim_padding({k: torch.from_numpy(v) for k, v in collated.items()}, PADDED, multiple)
        assert all(torch.equal(old[k], new[k]) for k in old), multiple
