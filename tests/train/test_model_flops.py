"""The model FLOPs behind ``perf/mfu`` and the GPU bench row: a hand computation, torch's own count of the matrix
products a training step runs, and the bench and the run counting one batch alike."""

from __future__ import annotations

import pytest
import torch
from transformers import BertConfig, BertForMaskedLM, XLMRobertaConfig, XLMRobertaForMaskedLM

from distalign.objectives.mlm import MLMObjective
from distalign.train.model_flops import ModelFlops
from distalign.train.module import TrainingModule
from distalign.train.step_timing import StepTimer

TINY = dict(
    vocab_size=50,
    hidden_size=8,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=16,
    max_position_embeddings=40,
)


def tiny_masked_lm(kind: str, attn_implementation: str = "sdpa"):
    torch.manual_seed(0)
    if kind == "bert":
        return BertForMaskedLM(BertConfig(**TINY, attn_implementation=attn_implementation))
    return XLMRobertaForMaskedLM(XLMRobertaConfig(**TINY, pad_token_id=1, attn_implementation=attn_implementation))


def mask(width: int, lengths: list[int]) -> torch.Tensor:
    return (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()


@pytest.mark.parametrize("kind", ["bert", "xlmr"])
def test_step_flops_against_a_hand_computation(kind):
    flops = ModelFlops.of(tiny_masked_lm(kind))
    # per layer: Q, K, V, output 4 x 8 x 8 = 256, feed-forward 2 x 8 x 16 = 256; the head: 8 x 8 + 8 x 50 = 464
    assert flops == ModelFlops(encoder_weights=2 * 512, layers=2, attention_width=8, head_weights=464)
    labels = torch.full((2, 5), -100)
    labels[0, 1], labels[1, 2], labels[1, 4] = 7, 8, 9
    step = {
        "corpus": {"attention_mask": mask(5, [3, 5]), "labels": labels, "masked_ids": torch.zeros(2, 5)},
        "constraints": {
            "attention_mask1": mask(4, [2, 4]),
            "attention_mask2": mask(4, [3, 3]),
            "synset": torch.zeros(2),
        },
    }
    # real tokens 3 + 5 + 2 + 4 + 3 + 3 = 20, their squares 9 + 25 + 4 + 16 + 9 + 9 = 72, labelled 3
    forward = 2 * 1024 * 20 + 4 * 2 * 8 * 72 + 2 * 464 * 3
    assert flops.step_flops([step]) == 3 * forward
    assert flops.step_flops([step, step]) == 6 * forward  # micro-batches add up


def test_one_full_sequence_is_palms_6n_plus_12_lhqt_per_token():
    """XLM-R base on one 512-token sequence: PaLM's per-token count, with N the encoder's and the head's weights."""
    config = XLMRobertaConfig(
        vocab_size=250002, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
    )
    with torch.device("meta"):
        flops = ModelFlops.of(XLMRobertaForMaskedLM(config))
    n_encoder = 12 * (4 * 768**2 + 2 * 768 * 3072)
    n_head = 768**2 + 768 * 250002
    step = {"corpus": {"attention_mask": torch.ones(1, 512), "labels": torch.zeros(1, 512)}}  # every token labelled
    assert flops.step_flops([step]) / 512 == pytest.approx(6 * (n_encoder + n_head) + 12 * 12 * 768 * 512)


@pytest.mark.parametrize("kind", ["bert", "xlmr"])
def test_the_count_is_the_matrix_products_torch_runs(kind):
    """With nothing padded, ``step_flops`` equals torch's FLOP counter over the forward and backward of the MLM
    objective (its head at the labelled positions; eager attention: its two products are plain matmuls)."""
    from torch.utils.flop_counter import FlopCounterMode

    model = tiny_masked_lm(kind, "eager")
    labels = torch.full((3, 6), -100)
    labels[0, 2], labels[2, 5] = 11, 12
    batch = {
        "masked_ids": torch.randint(5, 50, (3, 6)),
        "attention_mask": torch.ones(3, 6, dtype=torch.long),
        "labels": labels,
    }
    with FlopCounterMode(display=False) as counter:
        MLMObjective()(TrainingModule(model, {}, {}), batch).backward()
    assert ModelFlops.of(model).step_flops([{"corpus": batch}]) == counter.get_total_flops()


def test_the_bench_and_the_run_count_one_batch_alike():
    from distalign.tools.bench.gpu import Shape, random_batches, step_model_flops

    config = dict(
        vocab_size=300,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=80,
    )
    batches = random_batches(Shape(4, 16, 8, 8), config["vocab_size"], torch.device("cpu"))
    timer = StepTimer(torch.device("cpu"), ModelFlops.of(XLMRobertaForMaskedLM(XLMRobertaConfig(**config))))
    timer.count([batches])
    assert timer.window.flops == step_model_flops(config, batches) > 0
