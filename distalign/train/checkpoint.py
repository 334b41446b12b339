"""Checkpoint layout (one directory per checkpoint, merged by Ray Train from all ranks):

    trainer_state.json   step, MLflow run id, the vanilla model's validation MRRs (rank 0)
    model/               Hugging Face model + tokenizer, loadable by ``from_pretrained`` (rank 0);
                         with adapters, the base model plus adapters.safetensors/json beside it
    objectives.pt        parameters and state owned by objectives, not exported with the model (rank 0):
                         DICT-MLM's language embeddings and head, sense vectors
    optimizer.pt         DDP optimizer and LR schedule (rank 0)
    deepspeed/           DeepSpeed engine state, ZeRO shards from every rank
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from distalign.models.adapters import save_pretrained_with_adapters

STATE_FILE = "trainer_state.json"
OBJECTIVES_FILE = "objectives.pt"
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
            objective_state = engine.module.objectives.state_dict()
            if objective_state:
                torch.save(objective_state, directory / OBJECTIVES_FILE)
            tokenizer.save_pretrained(directory / MODEL_DIR)
            write_state(directory, state)


def load_objective_state(model, directory: Path) -> None:
    """Objective-owned parameters of a checkpoint (before the engine wraps the model)."""
    path = directory / OBJECTIVES_FILE
    if path.is_file():
        model.objectives.load_state_dict(torch.load(path, map_location="cpu", weights_only=False))
