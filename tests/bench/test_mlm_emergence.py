"""distalign.bench.mlm_emergence: alignment learning curves of the bench's MLM cell, trained in this process."""

import csv

import pytest
import torch

from distalign.bench import mlm_emergence
from distalign.bench.mlm_emergence import Setting, trimmed
from test_synthetic_bench import corpus


def test_trimming_the_padding_columns_leaves_the_mlm_loss_alone():
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    torch.manual_seed(0)
    model = XLMRobertaForMaskedLM(XLMRobertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1,
                                                   num_attention_heads=2, intermediate_size=32,
                                                   max_position_embeddings=20, pad_token_id=1)).eval()
    ids = torch.randint(5, 50, (3, 18))
    mask = torch.zeros(3, 18, dtype=torch.long)
    for row, length in enumerate([7, 11, 4]):
        mask[row, :length] = 1
    ids = torch.where(mask.bool(), ids, torch.ones_like(ids))
    labels = torch.where(mask.bool() & (torch.rand(3, 18) < 0.5), ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]  # at least one label
    batch = {"masked_ids": ids, "attention_mask": mask, "labels": labels, "lang_id": torch.tensor([0, 1, 0])}
    short = trimmed(batch)
    assert short["masked_ids"].shape == (3, 11) and torch.equal(short["lang_id"], batch["lang_id"])
    losses = [model(input_ids=b["masked_ids"], attention_mask=b["attention_mask"], labels=b["labels"]).loss
              for b in (batch, short)]
    assert losses[0].item() == pytest.approx(losses[1].item(), abs=1e-6)


def test_a_curve_has_the_alignment_at_step_zero_and_every_n_steps(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    monkeypatch.setitem(mlm_emergence.SETTINGS, "tiny", Setting("a toy corpus", {
        "corpus": str(corpus(tmp_path)), "eval_words": 4, "min_count": 1}, ("model.tiny.vocab_size=200",)))
    assert mlm_emergence.main(["--settings", "tiny", "--steps", "4", "--every", "3",
                               "--output-dir", str(tmp_path / "out")]) == 0
    with (tmp_path / "out" / "curves.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == [0, 3, 4]
    assert all(0 <= float(r["alignment"]) <= 100 and int(r["tokens"]) > 0 for r in rows)
    assert float(rows[-1]["mlm_loss"]) > 0 and (tmp_path / "out" / "curves.png").stat().st_size > 0
