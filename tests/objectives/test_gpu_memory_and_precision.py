"""What issue 45 found in the objectives' GPU paths, checked on CPU: the MLM loss copies no [M, V] tensor, InfoNCE
keeps fp32 similarities under bf16 autocast, and sense-aware updates its state in place with one gather a step."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from distalign.objectives.lexical import info_nce
from distalign.objectives.mlm import masked_lm_loss


class Allocations(TorchDispatchMode):
    """The aten ops that produce a tensor of ``numel`` elements."""

    def __init__(self, numel: int):
        super().__init__()
        self.numel, self.ops = numel, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if any(
            isinstance(t, torch.Tensor) and t.numel() == self.numel
            for t in (out if isinstance(out, (tuple, list)) else (out,))
        ):
            self.ops.append(str(func.overloadpacket.__name__))
        return out


def test_the_mlm_loss_on_selected_logits_makes_no_second_copy_of_them():
    """On logits already taken at the M labelled positions: no selection again (a copy of [M, V] and a zero-filled
    gradient of it), only the log-softmax and its gradient; ~10 GB at 64 x 512 tokens with XLM-R's vocabulary."""
    logits = torch.randn(37, 1009, requires_grad=True)
    labels = torch.randint(0, 1009, (37,))
    with Allocations(logits.numel()) as seen:
        masked_lm_loss(logits, labels).backward()
    assert not {"index", "index_put", "index_put_", "zeros", "new_zeros", "masked_select"} & set(seen.ops), seen.ops
    assert seen.ops.count("_log_softmax") == 1
    expected = torch.nn.functional.cross_entropy(logits, labels)
    assert torch.allclose(masked_lm_loss(logits, labels), expected)


def test_info_nce_under_bf16_autocast_equals_its_fp32_loss():
    """DDP's bf16 autocast ran ``x @ x.T`` in bf16 (~0.06 in the logits at temperature 0.07); DeepSpeed's bf16 runs
    have no autocast: the two engines trained different losses."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 128, generator=g), torch.randn(64, 128, generator=g)
    ids = torch.randint(0, 20, (64,), generator=g)
    fp32 = info_nce(a, b, ids)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under_autocast = info_nce(a, b, ids)
    assert abs(under_autocast.item() - fp32.item()) < 1e-4


def test_sense_state_moves_in_place_with_one_gather_a_step():
    from test_sense_aware import corpus_batch, make_objective

    model, objective = make_objective(warmup_steps=0)
    model.train()
    centres = objective.sense_state.centres
    gathers = []

    def gather(rows):
        gathers.append(rows.shape)
        return rows

    for step in range(3):
        model({"corpus": corpus_batch(seed=step)})
        objective.update_state(gather=gather)
    assert len(gathers) == 3 and all(len(shape) == 2 for shape in gathers)  # one [n, 1 + d] gather a step
    assert objective.sense_state.centres is centres  # updated in place: no copy of V x S x d a step
