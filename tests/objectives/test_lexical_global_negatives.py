"""Contrastive negatives span the global batch: 2 workers x 16 pairs train exactly as 1 worker x 32 pairs."""

from __future__ import annotations

import torch
import torch.multiprocessing as mp

from distalign.objectives.lexical import _local, gather_pairs, sense_info_nce

PAIRS, TOKENS, IN_DIM, DIM = 32, 4, 6, 8


def inputs():
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(PAIRS, TOKENS, IN_DIM, generator=g), torch.randn(PAIRS, TOKENS, IN_DIM, generator=g)
    word = (torch.arange(TOKENS) < 2).long().expand(PAIRS, TOKENS)  # first two tokens: the word
    gloss = torch.zeros(PAIRS, TOKENS, dtype=torch.long)
    gloss[::3, 2:] = 1  # a third of the pairs have glosses on both sides
    synsets = torch.arange(PAIRS) // 3  # positives within a worker's half and across the halves
    return x1, x2, word, gloss, synsets


def loss_and_grad(rows: slice, gather) -> tuple[float, torch.Tensor]:
    """The gloss-level InfoNCE of a linear encoder on ``rows`` of the pairs, and the encoder's gradient."""
    torch.manual_seed(1)
    encoder = torch.nn.Linear(IN_DIM, DIM)
    x1, x2, word, gloss, synsets = (t[rows] for t in inputs())
    loss = sense_info_nce(encoder(x1), encoder(x2), word, word, gloss, gloss, synsets, 0.1, gloss_weight=0.5,
                          gather=gather)
    loss.backward()
    return loss.item(), encoder.weight.grad


def _worker(rank, init_file, results):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    loss, grad = loss_and_grad(slice(rank * PAIRS // 2, (rank + 1) * PAIRS // 2), gather_pairs)
    local_loss, _ = loss_and_grad(slice(rank * PAIRS // 2, (rank + 1) * PAIRS // 2), _local)
    dist.all_reduce(grad)
    grad /= 2  # DDP averages gradients over workers
    results[rank] = (loss, grad, local_loss)
    dist.destroy_process_group()


def test_two_workers_with_global_negatives_match_one_worker_with_the_whole_batch(tmp_path):
    results = mp.Manager().dict()
    # spawn, not fork: a child forked after this process ran autograd can deadlock in its backward
    mp.start_processes(_worker, args=(str(tmp_path / "init"), results), nprocs=2, start_method="spawn")
    full_loss, full_grad = loss_and_grad(slice(None), _local)
    for rank in (0, 1):
        loss, grad, local_loss = results[rank]
        assert abs(loss - full_loss) < 1e-5
        assert torch.allclose(grad, full_grad, atol=1e-6)
        assert abs(local_loss - full_loss) > 1e-3  # each worker's own pairs alone are a different loss
