"""Checkpoint layout (one directory per checkpoint, merged by Ray Train from all ranks):

    trainer_state.json   step, MLflow run id, the vanilla model's validation MRRs (rank 0)
    model/               Hugging Face model + tokenizer, loadable by ``from_pretrained`` (rank 0);
                         with adapters, the base model plus adapters.safetensors/json beside it
    optimizer.pt         DDP optimizer and LR schedule (rank 0)
    deepspeed/           DeepSpeed engine state, ZeRO shards from every rank
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from distalign.models.adapters import save_pretrained_with_adapters

STATE_FILE = "trainer_state.json"
MODEL_DIR = "model"


@dataclass
class TrainerState:
    step: int = 0
    mlflow_run_id: str = ""
    baseline_mrr: dict[str, float] = field(default_factory=dict)  # per pair, before training (model selection)


def write_state(directory: Path, state: TrainerState) -> None:
    (directory / STATE_FILE).write_text(json.dumps(asdict(state)))


def read_state(directory: Path) -> TrainerState:
    return TrainerState(**json.loads((directory / STATE_FILE).read_text()))


def save_checkpoint(directory: Path, engine, tokenizer, state: TrainerState, rank: int) -> None:
    engine.save(directory, rank)
    with engine.full_weights():
        if rank == 0:
            save_pretrained_with_adapters(engine.module.masked_lm, directory / MODEL_DIR)
            tokenizer.save_pretrained(directory / MODEL_DIR)
            write_state(directory, state)
