"""Per-rank memory of BabelBERT's cross-worker InfoNCE against the worker count W: one rank's loss and backward,
before (every rank gathers all W·2B items in fp32 and computes the whole [W·2B, W·2B] loss) and after the split
(``distalign.objectives.lexical.global_info_nce``: the items gathered in bf16, each rank's own 2B rows against them).

    python -m distalign.tools.bench.negatives --worlds 8,16,32,64,128 --pairs 64 --dim 768

Simulated on CPU in one process: a fake process group of W ranks (torch's ``fake`` backend: collectives allocate
their outputs and move nothing) and fake tensors (shapes and dtypes, no data), counted by the memory bench's
``LiveBytes`` from the rank's pooled rows [2B, d] (bf16, as under autocast) to the gradient they receive. The
encoder is not counted (``distalign bench memory`` counts it); the allocator's rounding and fragmentation are not
either. ``distalign bench scale`` (issue 47) reads ``measure`` for its per-rank InfoNCE row.
"""

from __future__ import annotations

# host-side module: fake tensors on the CPU, never a device
import argparse
import contextlib
import math
from dataclasses import dataclass

import torch
import torch.distributed as dist

from distalign import collectives
from distalign.objectives.lexical import global_info_nce, info_nce
from distalign.tools.bench.memory import LiveBytes

MB = 2**20


def gather_everything_info_nce(
    a: torch.Tensor, b: torch.Tensor, synset_ids: torch.Tensor, temperature: float, pairs: torch.Tensor | None = None
) -> torch.Tensor:
    """The cross-worker InfoNCE before the split, kept as the baseline: every rank gathers all pairs in fp32
    (with their gradients) and computes the whole [2WB, 2WB] loss."""

    def gather(rows: torch.Tensor) -> torch.Tensor:
        return collectives.all_gather_rows(rows, with_grad=rows.is_floating_point(), same_size=True)

    return info_nce(
        gather(a.float()), gather(b.float()), gather(synset_ids), temperature, None if pairs is None else gather(pairs)
    )


CONTRASTS = {"before": gather_everything_info_nce, "after": global_info_nce}


def rank_peak_bytes(
    world: int, pairs: int, dim: int, contrast: str, dtype: torch.dtype = torch.bfloat16, fake: bool = True
) -> int:
    """The most bytes live at once on one rank of ``world`` during ``CONTRASTS[contrast]`` of its ``pairs`` pairs
    of ``dim``-wide pooled rows in ``dtype``, and its backward (the rows themselves counted). ``fake``: traced
    without computing; else computed on real (random) rows, the check of the trace at small sizes."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers the "fake" backend

    if collectives.initialized():
        raise RuntimeError("rank_peak_bytes starts its own (fake) process group: call it outside of one")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        mode = FakeTensorMode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext()
        with mode:
            a, b = (torch.randn(pairs, dim, dtype=dtype, requires_grad=True) for _ in range(2))
            synsets = torch.randint(0, pairs, (pairs,))
        tracker = LiveBytes(mode if fake else None)
        for rows in (a, b, synsets):
            tracker.count(rows)
        with mode, tracker:
            CONTRASTS[contrast](a, b, synsets, 0.07).backward()
        return tracker.peak()
    finally:
        dist.destroy_process_group()


@dataclass
class Row:
    world: int
    pairs: int  # a rank's B
    dim: int
    before: int  # peak bytes of one rank
    after: int

    @property
    def items(self) -> int:
        return self.world * 2 * self.pairs


def measure(worlds: list[int], pairs: int = 64, dim: int = 768) -> list[Row]:
    return [
        Row(w, pairs, dim, rank_peak_bytes(w, pairs, dim, "before"), rank_peak_bytes(w, pairs, dim, "after"))
        for w in worlds
    ]


def slope(rows: list[Row], side: str) -> float:
    """The exponent k of peak ∝ W^k between the smallest and the largest W."""
    first, last = rows[0], rows[-1]
    return math.log(getattr(last, side) / getattr(first, side)) / math.log(last.world / first.world)


def format_table(rows: list[Row]) -> str:
    lines = [
        "| W | items W·2B | before: peak MiB | before / one [W·2B]² fp32 | after: peak MiB | after: bytes per item |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.world} | {row.items} | {row.before / MB:,.1f} | {row.before / (4 * row.items**2):.1f} "
            f"| {row.after / MB:,.1f} | {row.after / row.items:,.0f} |"
        )
    if len(rows) > 1:
        lines.append(
            f"\nB = {rows[0].pairs} pairs a rank, d = {rows[0].dim}; peak ∝ W^k from W = {rows[0].world} "
            f"to {rows[-1].world}: before k = {slope(rows, 'before'):.2f}, "
            f"after k = {slope(rows, 'after'):.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m distalign.tools.bench.negatives", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--worlds", default="8,16,32,64,128", help="comma-separated worker counts W")
    parser.add_argument("--pairs", type=int, default=64, help="constraint pairs a rank (train.constraint_batch_size)")
    parser.add_argument("--dim", type=int, default=768, help="hidden size (XLM-R base 768, large 1024)")
    args = parser.parse_args(argv)
    print(format_table(measure([int(w) for w in args.worlds.split(",")], args.pairs, args.dim)))


if __name__ == "__main__":
    main()
