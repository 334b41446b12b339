"""What computing the MLM logits at the masked positions only saves: tokens per second of an MLM training step
(forward, backward, AdamW) with the head on every position against the head on the labelled ones
(``distalign.objectives.mlm.labelled_logits``), interleaved on the same batches, on this machine's device. On a
GPU the clock is the wall clock (synchronised); on CPU it is the process's CPU time in one thread, which a
machine shared with other work disturbs less than the wall clock.

    python -m distalign.tools.bench.mlm_head               # a few minutes on 2 CPU cores
    python -m distalign.tools.bench.mlm_head --steps 20

Two models: the quickstart's tiny one (a 2,000-word vocabulary, 16 sentences of 64 tokens) and one with
XLM-R's 250,002-word vocabulary on a small encoder, where the vocabulary projection dominates the step.
A figure printed, not a test: nothing asserts a speed.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import torch

from distalign.objectives.mlm import masked_lm_loss, mlm_loss
from distalign.tools.bench.gpu import Shape, random_batches


@dataclass
class Case:
    name: str
    model: dict  # XLMRobertaConfig keywords
    shape: Shape


CASES = (
    Case(
        "quickstart model (vocabulary 2,000, hidden 64, 2 layers), 16 x 64 tokens",
        dict(vocab_size=2000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128),
        Shape(sequences=16, sequence_length=64),
    ),
    Case(
        "XLM-R vocabulary (250,002), hidden 64, 2 layers, 4 x 64 tokens",
        dict(vocab_size=250002, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128),
        Shape(sequences=4, sequence_length=64),
    ),
)


def full_logit_loss(masked_lm, corpus: dict[str, torch.Tensor]) -> torch.Tensor:
    """The loss as computed before: the head on every position, the cross-entropy over the labelled ones."""
    logits = masked_lm(input_ids=corpus["masked_ids"], attention_mask=corpus["attention_mask"]).logits
    return masked_lm_loss(logits, corpus["labels"])


def labelled_loss(masked_lm, corpus: dict[str, torch.Tensor]) -> torch.Tensor:
    return mlm_loss(
        masked_lm, corpus["labels"], input_ids=corpus["masked_ids"], attention_mask=corpus["attention_mask"]
    )


def tokens_per_s(case: Case, steps: int, rounds: int = 3) -> dict[str, float]:
    """Tokens per second of each way of computing the loss, interleaved over ``rounds`` after a warm-up step."""
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    torch.manual_seed(0)
    masked_lm = XLMRobertaForMaskedLM(
        XLMRobertaConfig(**case.model, max_position_embeddings=case.shape.sequence_length + 2, pad_token_id=1)
    ).to(device)  # type: ignore[arg-type]
    optimizer = torch.optim.AdamW(masked_lm.parameters(), lr=1e-4)
    corpus = random_batches(case.shape, case.model["vocab_size"], device)["corpus"]
    ways = {"every position": full_logit_loss, "labelled positions": labelled_loss}
    seconds = dict.fromkeys(ways, 0.0)
    clock = time.perf_counter if device.type == "cuda" else time.process_time

    def step(loss_fn):
        loss_fn(masked_lm, corpus).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for loss_fn in ways.values():
        step(loss_fn)
    for _ in range(rounds):
        for name, loss_fn in ways.items():
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = clock()
            for _ in range(steps):
                step(loss_fn)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds[name] += clock() - start
    tokens = case.shape.sequences * case.shape.sequence_length * steps * rounds
    return {name: tokens / s for name, s in seconds.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="timed steps per way per round (3 rounds)")
    args = parser.parse_args(argv)
    if torch.cuda.is_available():
        device = f"{torch.cuda.get_device_name()}, tokens per second"
    else:
        torch.set_num_threads(1)
        device = "CPU, one thread, tokens per CPU second"
    print(f"MLM training step on {device}, {time.strftime('%Y-%m-%d')}: head on every position -> labelled only")
    for case in CASES:
        rates = tokens_per_s(case, args.steps)
        full, labelled = rates["every position"], rates["labelled positions"]
        print(f"  {case.name}: {full:,.0f} -> {labelled:,.0f} ({labelled / full:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
