"""Contrastive negatives span the global batch at any W: W workers x B pairs train exactly as 1 worker x W·B pairs,
each rank computing only its own items' rows against every rank's items (``global_info_nce``)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.multiprocessing as mp
from torch.utils._python_dispatch import TorchDispatchMode

from distalign.objectives.lexical import global_info_nce, info_nce, info_nce_share, sense_info_nce
from distalign.tools.bench.negatives import gather_everything_info_nce

PAIRS, TOKENS, IN_DIM, DIM = 24, 4, 6, 8
LEVELS = {"type": 0.0, "sense with glosses": 0.5}  # gloss_weight: the gloss term uses the same negatives
TOLERANCE = 1e-6


def inputs():
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(PAIRS, TOKENS, IN_DIM, generator=g), torch.randn(PAIRS, TOKENS, IN_DIM, generator=g)
    word = (torch.arange(TOKENS) < 2).long().expand(PAIRS, TOKENS)  # first two tokens: the word
    gloss = torch.zeros(PAIRS, TOKENS, dtype=torch.long)
    gloss[::3, 2:] = 1  # a third of the pairs have glosses on both sides
    synsets = torch.arange(PAIRS) // 5  # synsets straddle the ranks' shares, so positives cross ranks
    return x1, x2, word, gloss, synsets


def loss_and_grads(rows: slice, contrast, gloss_weight: float) -> tuple[float, list[torch.Tensor]]:
    """The InfoNCE of a linear encoder on ``rows`` of the pairs, and the encoder's gradients."""
    torch.manual_seed(1)
    encoder = torch.nn.Linear(IN_DIM, DIM)
    x1, x2, word, gloss, synsets = (t[rows] for t in inputs())
    loss = sense_info_nce(encoder(x1), encoder(x2), word, word, gloss, gloss, synsets, 0.1, gloss_weight, contrast)
    loss.backward()
    return loss.item(), [p.grad for p in encoder.parameters()]


class Collectives(TorchDispatchMode):
    """Records the c10d ops a forward dispatches, with the dtypes of their floating-point tensors."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[str, set]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "c10d":
            tensors = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            self.seen.append((func.overloadpacket.__name__, {t.dtype for t in tensors if t.is_floating_point()}))
        return func(*args, **(kwargs or {}))


def _worker(rank, world, init_file, results):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    share = slice(rank * PAIRS // world, (rank + 1) * PAIRS // world)
    for level, gloss_weight in LEVELS.items():
        # the split, the implementation before it (every rank computes the whole loss), each worker's own pairs
        for name, contrast in (("split", global_info_nce), ("gathered", gather_everything_info_nce), ("own", info_nce)):
            loss, grads = loss_and_grads(share, contrast, gloss_weight)
            for grad in grads:
                dist.all_reduce(grad)
                grad /= world  # DDP averages gradients over workers
            results[rank, level, name] = (loss, grads)
    # under bf16 autocast the items travel in bf16: one gather of them, one of their labels, one sum of the shares
    encoder = torch.nn.Linear(IN_DIM, DIM)
    x1, x2, word, _, synsets = (t[share] for t in inputs())
    with torch.autocast("cpu", dtype=torch.bfloat16), Collectives() as recorded:
        global_info_nce(encoder(x1[:, 0]), encoder(x2[:, 0]), synsets, 0.1)
    results[rank, "collectives"] = recorded.seen
    dist.destroy_process_group()


@pytest.mark.heavy  # spawns gloo processes: ~15 s (2), ~25 s (4)
@pytest.mark.parametrize("world", [2, 4])
def test_workers_with_global_negatives_match_one_worker_with_the_whole_batch(world, tmp_path):
    results = mp.Manager().dict()
    # spawn, not fork: a child forked after this process ran autograd can deadlock in its backward
    mp.start_processes(_worker, args=(world, str(tmp_path / "init"), results), nprocs=world, start_method="spawn")
    for level, gloss_weight in LEVELS.items():
        full_loss, full_grads = loss_and_grads(slice(None), info_nce, gloss_weight)
        for rank in range(world):
            for name in ("split", "gathered"):  # the new way and the old one, on every rank
                loss, grads = results[rank, level, name]
                assert abs(loss - full_loss) < TOLERANCE, (level, name, rank)
                for grad, full in zip(grads, full_grads):
                    assert torch.allclose(grad, full, rtol=0, atol=TOLERANCE), (level, name, rank)
            own_loss, _ = results[rank, level, "own"]
            assert abs(own_loss - full_loss) > 1e-3  # each worker's own pairs alone are a different loss
    for rank in range(world):
        assert results[rank, "collectives"] == [
            ("allgather_", {torch.bfloat16}),
            ("allgather_", set()),
            ("allreduce_", {torch.float64}),
        ]


def naive_share(items, labels, taking, rows, temperature):
    """Plain loops over the rows' positive pairs (i, j), the candidates of i being every item but i itself."""
    x = torch.nn.functional.normalize(items, dim=-1)
    total, count = 0.0, 0
    for i in rows:
        for j in range(len(items)):
            if j == i or labels[j] != labels[i] or not (taking[i] and taking[j]):
                continue
            negatives = [n for n in range(len(items)) if n != i and labels[n] != labels[i] and taking[n]]
            s = lambda n: float(x[i] @ x[n]) / temperature  # noqa: B023, E731 (used within this iteration)
            total += math.log(math.exp(s(j)) + sum(math.exp(s(n)) for n in negatives)) - s(j)
            count += 1
    return total, count


@pytest.mark.parametrize("world", [1, 3, 4])
def test_each_rank_s_rows_see_every_item_of_every_rank_but_themselves(world):
    """The split's wiring without processes: rank r's rows are items r·2B..(r+1)·2B of the gathered W·2B."""
    pairs_per_rank = 3
    g = torch.Generator().manual_seed(world)
    items = torch.randn(world * 2 * pairs_per_rank, 5, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 4, (len(items),), generator=g)
    taking = torch.rand(len(items), generator=g) > 0.2
    shares = []
    for rank in range(world):
        first, count = rank * 2 * pairs_per_rank, 2 * pairs_per_rank
        total, positives = info_nce_share(items, labels, taking, first, count, 0.5)
        expected_total, expected_count = naive_share(items, labels, taking, range(first, first + count), 0.5)
        assert positives.item() == expected_count
        assert total.item() == pytest.approx(expected_total, rel=1e-12, abs=1e-12)
        shares.append((total, positives))
    whole_total, whole_count = naive_share(items, labels, taking, range(len(items)), 0.5)
    assert sum(t for t, _ in shares).item() == pytest.approx(whole_total, rel=1e-12)
    assert sum(c for _, c in shares).item() == whole_count


def test_without_a_process_group_global_is_info_nce():
    g = torch.Generator().manual_seed(3)
    a = torch.randn(6, 5, generator=g, requires_grad=True)
    b = torch.randn(6, 5, generator=g)
    labels, pairs = torch.tensor([0, 1, 0, 2, 1, 3]), torch.tensor([True, True, False, True, True, True])
    for taking in (None, pairs):
        expected = info_nce(a, b, labels, 0.1, taking)
        (expected_grad,) = torch.autograd.grad(expected, a)
        got = global_info_nce(a, b, labels, 0.1, taking)
        (grad,) = torch.autograd.grad(got, a)
        assert got.dtype == expected.dtype and got.item() == pytest.approx(expected.item(), abs=1e-6)
        assert torch.allclose(grad, expected_grad, rtol=0, atol=1e-7)
