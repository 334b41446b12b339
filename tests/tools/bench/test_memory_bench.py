"""``distalign bench memory``: the row on a tiny model, the ZeRO accounting against a hand computation, and the traced
activation peak against the CPU allocator's own count of a real step (torch.profiler)."""

from __future__ import annotations

import pytest
from torch.profiler import ProfilerActivity, profile

from distalign.cli import main
from distalign.tools.bench import memory

TINY = dict(
    vocab_size=1000,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=128,
    max_position_embeddings=130,
)


def tiny():
    return memory.xlmr("tiny", **TINY)


def test_zero_accounting_by_hand():
    params, gpus = 278_000_000, 8
    assert memory.model_state_bytes(params, "ddp", gpus) == params * 16
    assert memory.model_state_bytes(params, "zero2", gpus) == pytest.approx(params * (2 + 14 / 8))  # 3.75 B
    assert memory.model_state_bytes(params, "zero3", gpus) == pytest.approx(params * 2)  # 16 / 8


def test_row_on_a_tiny_model(tmp_path):
    rows = memory.measure(["tiny"], 24, 32, 4, configs={"tiny": tiny()})  # half the batch: Deep CCA's k < 12
    assert len(rows) == len(memory.ROWS) * len(memory.ENGINES)
    by = {(r.objective, r.engine): r for r in rows}
    mlm, sense = by["mlm", "zero2"], by["sense_aware", "zero2"]
    # the masked LM's parameters: embeddings tied with the decoder, counted once
    model = sum(p.numel() for p in __import__("transformers").XLMRobertaForMaskedLM(tiny()).parameters())
    assert mlm.model_states == pytest.approx(model * (2 + 14 / 4))
    # sense-aware: S = 3 output vectors and biases per token, centres [V, S, d] in fp32, the translation table
    vocab, hidden, senses = TINY["vocab_size"], TINY["hidden_size"], 3
    assert sense.objective_states == pytest.approx(vocab * senses * (hidden + 1) * (2 + 14 / 4))
    assert sense.objective_state >= vocab * senses * hidden * 4 + vocab * 8 * 8
    assert by["dict_mlm", "ddp"].objective_states > 0 and by["mlm", "ddp"].objective_state == 0
    assert all(r.activations > 0 and r.per_sequence > 0 for r in rows)
    assert sense.activations > mlm.activations  # its logits span V x S classes
    table = memory.format_table(rows, 24, 32, 4)
    assert table.count("\n| tiny |") == len(rows) and "formula" in table and "traced" in table


def test_command_writes_results(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(memory.MODELS, "base", TINY)
    monkeypatch.setattr(memory, "ROWS", {"mlm": {"mlm": {}}})
    assert (
        main(
            [
                "bench",
                "memory",
                "--models",
                "base",
                "--batch",
                "4",
                "--seq",
                "32",
                "--gpus",
                "2",
                "--output-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    written = (tmp_path / "results.md").read_text()
    assert "| base | mlm | ZeRO-2 bf16 |" in written and written.strip() in capsys.readouterr().out


def test_largest_batch_rounds_down_and_keeps_headroom():
    row = memory.Row(
        model="m",
        objective="o",
        engine="ddp",
        model_states=10e9,
        objective_states=0,
        objective_state=0,
        engine_buffers=0,
        activations=64e9,
        per_sequence=1e9,
        sequences=64,
    )
    assert memory.largest_batch(row, 80e9) == 56  # (72 - 10) / 1 = 62 -> a multiple of 8
    small = memory.Row(
        model="m",
        objective="o",
        engine="ddp",
        model_states=70e9,
        objective_states=0,
        objective_state=0,
        engine_buffers=0,
        activations=2e9,
        per_sequence=1e9,
        sequences=2,
    )
    assert memory.largest_batch(small, 80e9) == 2  # 2 fit: a power of two
    assert (
        memory.largest_batch(
            memory.Row(
                model="m",
                objective="o",
                engine="ddp",
                model_states=80e9,
                objective_states=0,
                objective_state=0,
                engine_buffers=0,
                activations=1e9,
                per_sequence=1e9,
                sequences=1,
            ),
            80e9,
        )
        == 0
    )


def profiled_peak(step: memory.Step) -> int:
    """The most bytes the CPU allocator held at once during the real step, above what it held before."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step.run()
    live = peak = 0
    for event in prof.profiler.kineto_results.events():
        if event.name() == "[memory]":
            live += event.nbytes()
            peak = max(peak, live)
    return peak


@pytest.mark.parametrize("objective", ["mlm", "sense_aware", "dict_mlm", "lexical"])
@pytest.mark.parametrize("bf16_weights", [False, True])
def test_traced_peak_matches_a_real_step(objective, bf16_weights):
    """The fake trace's peak (gradients included, as the allocator sees them) within 15 % of the real step's."""
    row = memory.ROWS[objective]
    estimate = memory.trace_step(tiny(), row, 8, 128, bf16_weights)
    real = profiled_peak(memory.build_step(tiny(), row, 8, 128, bf16_weights, fake=False))
    assert estimate.peak_bytes == pytest.approx(real, rel=0.15)
    assert estimate.activation_bytes <= estimate.peak_bytes
