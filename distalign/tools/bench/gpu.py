"""Training throughput on one device: distalign's DDP and DeepSpeed ZeRO-2 engines against the Hugging Face
Trainer, on the same model, batches and objectives (``distalign bench perf``'s GPU row).

The model is XLM-R-base sized and randomly initialised from its config (no download); the batches are
random token ids in the shape of the batch contract: a corpus batch for MLM (by default 64 sequences of 512
tokens per GPU, a batch that fills the device; the first run's 32 x 128 left it idle between kernels) and a
constraint batch for the lexical InfoNCE. Each engine trains ``warmup`` steps, then ``steps`` timed ones
(synchronised). Every side computes the MLM logits at the masked positions only
(``distalign.objectives.mlm.labelled_logits``), so the rows compare the engines, not the heads.
Model FLOPs utilisation: the step's model FLOPs as the training run's ``perf/mfu`` counts them
(``distalign.train.model_flops``), divided by the device's dense bf16 peak.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist

from distalign.tools.bench.bare_loop import BareObjectives
from distalign.train.model_flops import ModelFlops
from distalign.train.step_timing import peak_flops

XLMR_BASE = {
    "vocab_size": 250002,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "max_position_embeddings": 514,
}


@dataclass
class Shape:
    sequences: int = 64  # corpus sequences per step (per GPU)
    sequence_length: int = 512
    pairs: int = 64  # constraint pairs per step
    word_tokens: int = 8
    mask_prob: float = 0.15  # share of corpus tokens the MLM predicts


@dataclass
class Throughput:
    engine: str
    step_s: float
    tokens_per_s: float
    mfu: float | None  # None where the device's peak is unknown


def random_batches(
    shape: Shape,
    vocab: int,
    device: torch.device,  # host-side: drawn on CPU, moved at the end
    seed: int = 0,
) -> dict[str, dict[str, torch.Tensor]]:
    """One step's batches in the batch contract's shapes: ``shape.mask_prob`` of corpus tokens masked, words
    of 1-6 subwords."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (shape.sequences, shape.sequence_length), generator=g)
    labelled = torch.rand(ids.shape, generator=g) < shape.mask_prob
    corpus = {
        "masked_ids": ids.masked_fill(labelled, 4),
        "attention_mask": torch.ones_like(ids),
        "labels": ids.masked_fill(~labelled, -100),
    }
    pairs = {"synset": torch.arange(shape.pairs)}
    for side in ("1", "2"):
        lengths = torch.randint(1, min(6, shape.word_tokens - 2) + 1, (shape.pairs,), generator=g)
        positions = torch.arange(shape.word_tokens)
        attention = (positions[None] < lengths[:, None] + 2).long()
        word = ((positions[None] >= 1) & (positions[None] <= lengths[:, None])).long()
        pairs |= {
            f"input_ids{side}": torch.randint(5, vocab, (shape.pairs, shape.word_tokens), generator=g) * attention,
            f"attention_mask{side}": attention,
            f"word_mask{side}": word,
            f"gloss_mask{side}": torch.zeros_like(word),
        }
    return {
        "corpus": {k: v.to(device) for k, v in corpus.items()},
        "constraints": {k: v.to(device) for k, v in pairs.items()},
    }


def step_model_flops(model_config: dict, batches: dict[str, dict[str, torch.Tensor]]) -> float:
    """The model FLOPs of one step on ``batches``, as the training run counts them (the model built without
    weights, on the meta device)."""
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    with torch.device("meta"):
        model = XLMRobertaForMaskedLM(XLMRobertaConfig(**model_config))
    return ModelFlops.of(model).step_flops([batches])


def _local_address() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{probe.getsockname()[1]}"


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _masked_lm(model_config: dict, seed: int):
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    torch.manual_seed(seed)
    return XLMRobertaForMaskedLM(XLMRobertaConfig(**model_config))


def distalign_engine_step_s(
    engine: str, model_config: dict, batches, steps: int, warmup: int, precision: str, device: torch.device
) -> float:
    """Seconds per step of distalign's engine (``ddp`` or ``zero2``) with the quickstart's MLM + lexical."""
    from distalign.config import TrainConfig
    from distalign.objectives.lexical import LexicalConfig, LexicalObjective
    from distalign.objectives.mlm import MLMObjective
    from distalign.train.engine import build_engine
    from distalign.train.module import TrainingModule

    module = TrainingModule(
        _masked_lm(model_config, 0),
        {"mlm": MLMObjective(), "lexical": LexicalObjective(LexicalConfig(temperature=0.07, global_negatives=True))},
        {"mlm": 1.0, "lexical": 1.0},
    )
    cfg = TrainConfig(
        engine="deepspeed" if engine == "zero2" else "ddp",
        zero_stage=2 if engine == "zero2" else 0,
        precision=precision,
        lr=1e-4,
        warmup_steps=0,
        max_steps=steps + warmup,
        constraint_batch_size=len(batches["constraints"]["synset"]),
    )
    trainer = build_engine(module, cfg, cfg.max_steps, uses_lm_head=True, device=device)
    for _ in range(warmup):
        trainer.step([batches])
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(steps):
        trainer.step([batches])
    _synchronize(device)
    return (time.perf_counter() - start) / steps


def hf_trainer_step_s(
    model_config: dict, batches, steps: int, warmup: int, precision: str, device: torch.device
) -> float:
    """Seconds per step of the Hugging Face Trainer on the same model, batches and loss (the bench's bare
    objectives), AdamW with clipping, timed by a callback over the steps after the warm-up."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    class Objectives(BareObjectives):
        def forward(self, corpus, constraints):  # the Trainer reads outputs["loss"]
            return {"loss": super().forward(corpus, constraints)}

    class Clock(TrainerCallback):
        started = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step == warmup:
                _synchronize(device)
                Clock.started = time.perf_counter()

    class SameBatch(torch.utils.data.Dataset):
        def __len__(self):
            return steps + warmup

        def __getitem__(self, index):
            return {"corpus": batches["corpus"], "constraints": batches["constraints"]}

    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            out,
            per_device_train_batch_size=1,
            max_steps=steps + warmup,
            learning_rate=1e-4,
            weight_decay=0.0,
            max_grad_norm=1.0,
            bf16=precision == "bf16",
            use_cpu=device.type == "cpu",
            save_strategy="no",
            report_to=[],
            logging_steps=10**9,
            dataloader_pin_memory=False,
            disable_tqdm=True,
        )
        trainer = Trainer(
            model=Objectives(_masked_lm(model_config, 0), 0.07),
            args=args,
            train_dataset=SameBatch(),
            data_collator=lambda items: items[0],
            callbacks=[Clock()],
        )
        trainer.train()
    _synchronize(device)
    return (time.perf_counter() - Clock.started) / steps


def throughput(
    model_config: dict | None = None,
    shape: Shape | None = None,
    steps: int = 20,
    warmup: int = 5,
    precision: str = "bf16",
) -> list[Throughput]:
    """DDP, ZeRO-2 and the Hugging Face Trainer on this process's device, in a process group of one."""
    model_config, shape = model_config or XLMR_BASE, shape or Shape()
    device = torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    started_group = not dist.is_initialized()
    if started_group:
        for key in ("RANK", "LOCAL_RANK"):  # DeepSpeed reads them
            os.environ.setdefault(key, "0")
        os.environ.setdefault("WORLD_SIZE", "1")
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo", init_method=_local_address(), rank=0, world_size=1
        )
    try:
        batches = random_batches(shape, model_config["vocab_size"], device)
        seconds = {
            engine: distalign_engine_step_s(engine, model_config, batches, steps, warmup, precision, device)
            for engine in ("ddp", "zero2")
        }
        seconds["hf-trainer"] = hf_trainer_step_s(model_config, batches, steps, warmup, precision, device)
    finally:
        if started_group:
            dist.destroy_process_group()
    tokens = shape.sequences * shape.sequence_length + 2 * shape.pairs * shape.word_tokens
    flops, peak = step_model_flops(model_config, batches), peak_flops(device)
    return [Throughput(engine, s, tokens / s, flops / s / peak if peak else None) for engine, s in seconds.items()]
