"""The MLM head benchmark (``python -m distalign.tools.bench.mlm_head``) times two ways to one loss: both give the same
value on its batches, and its timing runs (the figures themselves are printed, not asserted)."""

from __future__ import annotations

import pytest
import torch
from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

from distalign.tools.bench.gpu import Shape, random_batches
from distalign.tools.bench.mlm_head import Case, full_logit_loss, labelled_loss, tokens_per_s

TINY = dict(vocab_size=120, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32)


def test_both_ways_compute_one_loss():
    torch.manual_seed(0)
    masked_lm = XLMRobertaForMaskedLM(XLMRobertaConfig(**TINY, max_position_embeddings=20, pad_token_id=1)).eval()
    corpus = random_batches(Shape(sequences=4, sequence_length=16), 120, torch.device("cpu"))["corpus"]
    assert labelled_loss(masked_lm, corpus).item() == pytest.approx(full_logit_loss(masked_lm, corpus).item(), rel=1e-6)


def test_the_timing_runs_on_a_tiny_case():
    rates = tokens_per_s(Case("tiny", TINY, Shape(sequences=2, sequence_length=8)), steps=1, rounds=1)
    assert set(rates) == {"every position", "labelled positions"} and all(r > 0 for r in rates.values())
