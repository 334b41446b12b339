"""Fine-tuning speed: ``distalign transfer``'s step against the Hugging Face ``Trainer`` (``bench perf``'s row).

Both sides fine-tune the same model (the tiny XLM-R-style encoder under XNLI's sequence-classification head,
from the same saved weights) on the same sentence-pair features, the same batches in the same order (XTREME's
32 a step), with the same optimizer settings (AdamW, ε 1e-8, no weight decay, linear decay, clipping at 1.0):

- distalign: ``distalign.transfer.finetune.train_step`` with the collation and the per-step loss read of
  ``fine_tune``'s loop;
- the Trainer: ``Trainer.train`` over a data set whose item ``i`` is batch ``i``'s features, collated by the
  same ``collate`` (so the padding, hence the work, is identical), timed by a callback from the step after
  the warm-up to the last step's end.

The sides alternate over rounds in one process (one thread, as the step rows), each round a fresh model, after
a warm-up of each; each side's fastest round is its figure, in wall time and in the process's CPU time (on a
shared machine the wall time swings with the others' load; the CPU time of one thread much less).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from distalign.transfer.finetune import collate, load_model, optimizer_and_schedule, train_step
from distalign.transfer.tasks.pair import XNLITask

BATCH = 32  # XTREME's global batch
MIN_LENGTH = 24  # a pair's tokens, special tokens included; the longest fills the tiny model's positions


def pair_features(count: int, vocab_size: int, max_length: int, seed: int = 0) -> list[dict]:
    """Random-token sentence pairs with XNLI's three labels, of lengths in [MIN_LENGTH, max_length]."""
    rng = np.random.default_rng(seed)
    features = []
    for _ in range(count):
        length = int(rng.integers(MIN_LENGTH, max_length + 1))
        ids = rng.integers(5, vocab_size, length).astype(np.int32)  # past the tiny tokenizer's specials
        features.append(
            {
                "input_ids": ids,
                "attention_mask": np.ones(length, dtype=np.int32),
                "labels": int(rng.integers(len(XNLITask.labels))),
            }
        )
    return features


def tiny_classifier_dir(
    out: Path,
    vocab_size: int = 2000,
    hidden_size: int = 64,
    layers: int = 2,
    max_length: int = 64,
    seed: int = 0,
    dropout: float = 0.1,
) -> Path:
    """The tiny model's shape (``TinyModelConfig``'s defaults) saved as a masked LM, as a checkpoint holds it."""
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    torch.manual_seed(seed)
    config = XLMRobertaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=2 * hidden_size,
        max_position_embeddings=max_length + 2,
        pad_token_id=1,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    XLMRobertaForMaskedLM(config).save_pretrained(out)
    return out


def _clocks() -> np.ndarray:
    """(wall, CPU) seconds now; the CPU time of this process (one thread) barely moves with others' load."""
    return np.array([time.perf_counter(), time.process_time()])


def task_model(model_dir: str) -> torch.nn.Module:
    """The model both sides start from: the saved encoder under XNLI's head, initialised from the same seed."""
    torch.manual_seed(0)
    return load_model(model_dir, XNLITask).train()


def distalign_seconds(
    model: torch.nn.Module, batches: list[list[dict]], pad_id: int, warmup: int, steps: int
) -> np.ndarray:
    """(wall, CPU) seconds of ``steps`` steps of distalign's fine-tuning loop after ``warmup`` steps."""
    optimizer, schedule = optimizer_and_schedule(model, XNLITask.settings, len(batches))
    for index in range(warmup):
        train_step(XNLITask, model, model, optimizer, schedule, collate(batches[index], pad_id)).item()
    start = _clocks()
    for index in range(warmup, warmup + steps):  # fine_tune's loop: collate, step, read the loss
        train_step(XNLITask, model, model, optimizer, schedule, collate(batches[index], pad_id)).item()
    return _clocks() - start


def trainer_seconds(
    model: torch.nn.Module, batches: list[list[dict]], pad_id: int, warmup: int, steps: int
) -> np.ndarray:
    """(wall, CPU) seconds of ``steps`` steps of ``Trainer.train`` after ``warmup`` steps."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class Clock(TrainerCallback):
        started = ended = np.zeros(2)

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == warmup:
                Clock.started = _clocks()

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == warmup + steps:
                Clock.ended = _clocks()

    s = XNLITask.settings
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            out,
            per_device_train_batch_size=1,
            max_steps=warmup + steps,
            learning_rate=s.lr,
            weight_decay=s.weight_decay,
            adam_epsilon=1e-8,
            max_grad_norm=1.0,
            lr_scheduler_type="linear",
            warmup_steps=s.warmup_steps,
            use_cpu=True,
            save_strategy="no",
            report_to=[],
            logging_steps=10**9,
            dataloader_pin_memory=False,
            disable_tqdm=True,
        )
        # item i = batch i, in order: the Trainer's shuffling reorders items, so ask for one per data set pass
        trainer = Trainer(
            model=model,
            args=args,
            train_dataset=_InOrder(batches[: warmup + steps]),
            data_collator=lambda items: collate(items[0], pad_id),
            callbacks=[Clock()],
        )
        trainer.train()
    return Clock.ended - Clock.started


class _InOrder(torch.utils.data.Dataset):
    """Batch ``i`` at every index of pass ``i``: whatever order the Trainer's sampler draws, step i sees batch i."""

    def __init__(self, batches: list[list[dict]]):
        self.batches, self.served = batches, 0

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, index: int) -> list[dict]:
        batch = self.batches[self.served % len(self.batches)]
        self.served += 1
        return batch


def finetune_step_times(steps: int = 20, rounds: int = 5, warmup: int = 3) -> dict[str, float]:
    """Seconds per step of each side, wall (``<side>``) and CPU (``<side>_cpu``): the fastest of ``rounds``
    alternating rounds of ``steps`` timed steps (the least disturbed by other processes, as ``timeit`` reports)."""
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = str(tiny_classifier_dir(Path(scratch) / "model"))
        features = pair_features(BATCH * (warmup + steps), 2000, 64)
        batches = [features[i * BATCH : (i + 1) * BATCH] for i in range(warmup + steps)]
        seconds: dict[str, list[np.ndarray]] = {"distalign": [], "hf_trainer": []}
        for _ in range(rounds):
            seconds["distalign"].append(distalign_seconds(task_model(model_dir), batches, 1, warmup, steps) / steps)
            seconds["hf_trainer"].append(trainer_seconds(task_model(model_dir), batches, 1, warmup, steps) / steps)
    fastest = {name: np.min(values, axis=0) for name, values in seconds.items()}
    return {name: float(wall) for name, (wall, _) in fastest.items()} | {
        f"{name}_cpu": float(cpu) for name, (_, cpu) in fastest.items()
    }
