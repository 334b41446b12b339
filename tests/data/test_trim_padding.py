"""``trim_padding``: a batch cut to its longest row, against hand-made batches."""

from __future__ import annotations

import torch

from distalign.data.batches import TensorSpec, padded_names, trim_padding


def mask(width: int, lengths: list[int]) -> torch.Tensor:
    return (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()


def pairs_batch() -> dict[str, torch.Tensor]:
    """A constraint-like batch of 2 pairs padded to 8: side 1's longest word takes 3 positions, side 2's 5."""
    batch = {
        "attention_mask1": mask(8, [3, 2]),
        "attention_mask2": mask(8, [4, 5]),
        "synset": torch.tensor([4, 7]),
        "vector": torch.ones(2, 8),
    }  # B,D: as wide as the padding, but not padded
    batch["input_ids1"] = batch["attention_mask1"] * 9
    batch["input_ids2"] = batch["attention_mask2"] * 9
    return batch


PADDED = {"attention_mask1", "attention_mask2", "input_ids1", "input_ids2"}


def test_padded_names_are_the_b_t_tensors():
    specs = [
        TensorSpec("input_ids", "int64", "B,T"),
        TensorSpec("vector", "float32", "B,D"),
        TensorSpec("row", "int64", "B"),
    ]
    assert padded_names(specs) == {"input_ids"}


def test_both_sides_are_cut_to_the_longest_row_of_the_batch():
    batch = pairs_batch()
    trimmed = trim_padding(batch, PADDED)
    assert {name: tuple(t.shape) for name, t in trimmed.items()} == {
        "attention_mask1": (2, 5),
        "attention_mask2": (2, 5),
        "input_ids1": (2, 5),
        "input_ids2": (2, 5),
        "synset": (2,),
        "vector": (2, 8),
    }
    for name in PADDED:  # the cut columns were padding; what is kept is the batch's own
        assert torch.equal(trimmed[name], batch[name][:, :5]) and not batch[name][:, 5:].any()


def test_widths_round_up_to_the_multiple_but_never_past_the_padded_width():
    assert trim_padding(pairs_batch(), PADDED, multiple=4)["input_ids1"].shape == (2, 8)  # 5 -> 8: all of it
    assert trim_padding(pairs_batch(), PADDED, multiple=3)["input_ids2"].shape == (2, 6)
    batch = pairs_batch()
    assert trim_padding(batch, PADDED, multiple=16) is batch  # 16 > 8: nothing to cut


def test_left_padding_and_empty_masks():
    left = {"attention_mask": mask(6, [3, 4]).flip(1)}  # padding first: the last column is used, nothing is cut
    assert trim_padding(left, {"attention_mask"}) is left
    empty = {"attention_mask": torch.zeros(2, 6, dtype=torch.long)}
    assert trim_padding(empty, {"attention_mask"})["attention_mask"].shape == (2, 1)  # one column left
    no_mask = {"vector": torch.ones(2, 3)}
    assert trim_padding(no_mask, {"vector"}) is no_mask
