"""One fine-tuning run of the transfer protocol, as the function Ray Train runs on every worker (DDP).

Each worker loads the model with the task's head (seeded: the same head on every rank) and takes its
share of every global batch (the task's batch size over all workers, so the optimizer sees XTREME's
32 examples a step whatever the worker count). Every ``select_every`` steps (XTREME's ``--save_steps``)
it scores the selection dev sets; the weights with the best mean main metric over them are kept
(XTREME's ``--save_only_best_checkpoint``), and every language's test set is scored with them. Scoring runs inside
the workers: each rank predicts a strided share of the examples and the shares are gathered
(``all_gather_object``), so the test sets are scored by the same processes that hold the weights.

A distalign checkpoint's additions to the plain model come along (``load_model``):

- its adapters (BabelBERT's) are re-attached under the task head. ``adapter_training="adapters"`` (the
  default) trains the adapters and the new head with the encoder frozen, the regime BabelBERT specialises in
  ("only adapter parameters are tuned, while the PLM's pretrained parameters are kept fixed"; the paper
  fine-tunes no downstream task itself); ``"all"`` trains every parameter, adapters included.
- its input language table (DICT-MLM's, ``distalign.models.language_embeddings``) is added to the word
  embeddings: the source language's row while fine-tuning, each test language's row on its dev and test
  sets (§3.1). The table itself stays frozen.

What was trained is in the result (``trained``), printed and logged by the runner.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from distalign.device import to_device, use_tensor_cores
from distalign.models.adapters import attach_saved_adapters
from distalign.models.attention import prepared_masks
from distalign.models.language_embeddings import attach_input_languages, input_language, input_languages
from distalign.models.optimization import MAX_GRAD_NORM, parameter_groups
from distalign.storage import node_local
from distalign.transfer.metrics import IGNORE
from distalign.transfer.tasks.base import FineTuneSettings, TransferTask
from distalign.transfer.tasks.registry import TRANSFER_TASKS

RESULT_FILE = "transfer_result.json"


def compact(features: list[dict]) -> list[dict]:
    """Features with their token lists as int32 arrays: a tenth of the memory of Python ints, in the object store
    and in every worker (XNLI's 393K training pairs)."""
    return [
        {key: np.asarray(value, dtype=np.int32) if isinstance(value, list) else value for key, value in f.items()}
        for f in features
    ]


@dataclass
class TaskData:
    """A task's encoded features (``TransferTask.encode``, then ``compact``), shared by all its seeds through the
    object store."""

    train: list[dict]  # source language
    dev: dict[str, list[dict]]  # the selection languages' dev sets
    test: dict[str, list[dict]]  # every language's test set


@dataclass(frozen=True, kw_only=True)
class FineTuneJob:
    task: str  # a name in TRANSFER_TASKS
    seed: int
    model_path: str  # a Hugging Face model directory (readable on every node), a hub name, or a storage URI
    settings: FineTuneSettings
    eval_batch_size: int = 64
    source: str = "en"  # the fine-tuning language (its row of an input language table)
    adapter_training: Literal["adapters", "all"] = "adapters"  # with adapters: adapters + head, or every parameter
    endpoint_url: str = ""  # the storage endpoint of a model_path URI, which each node stages once (node_local)


def task_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the labelled positions (a pair's one label; a word's first subword; QA's start and end,
    each over the tokens), ``IGNORE`` left out."""
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1), ignore_index=IGNORE)


def collate(features: list[dict], pad_id: int) -> dict[str, torch.Tensor]:  # host-side: the caller moves it
    """Right-padded ``input_ids``/``attention_mask`` (and ``token_type_ids`` if the tokenizer gave them);
    ``labels`` [B] (pairs), [B, T] padded with ``IGNORE`` (tokens) or [B, 2] (QA's start and end)."""

    def padded(key: str, value: int) -> torch.Tensor:
        length = max(len(f[key]) for f in features)
        out = np.full((len(features), length), value, dtype=np.int64)
        for row, f in enumerate(features):
            out[row, : len(f[key])] = f[key]
        return torch.from_numpy(out)

    labels = (
        torch.tensor([f["labels"] for f in features])
        if isinstance(features[0]["labels"], int)
        else padded("labels", IGNORE)
    )
    batch = {"input_ids": padded("input_ids", pad_id), "attention_mask": padded("attention_mask", 0), "labels": labels}
    if "token_type_ids" in features[0]:
        batch["token_type_ids"] = padded("token_type_ids", 0)
    return batch


def model_inputs(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {key: value for key, value in batch.items() if key != "labels"}


def load_model(model_path: str, task: type[TransferTask], adapter_training: str = "adapters") -> torch.nn.Module:
    """The encoder under the task's new head, with the adapters and the input language table saved beside it (if
    any); trainable: everything, or with adapters and ``adapter_training="adapters"`` the adapters and the head.
    The language table is frozen."""
    import transformers

    auto = getattr(transformers, task.model_class)
    model = prepared_masks(auto.from_pretrained(model_path, num_labels=len(task.labels)))
    if attach_saved_adapters(model, model_path):  # it froze every other parameter
        encoder = model.base_model_prefix + "."
        for name, param in model.named_parameters():
            param.requires_grad_(adapter_training == "all" or not name.startswith(encoder) or ".adapter." in name)
    attach_input_languages(model, model_path)
    return model


def trained_parameters(model: torch.nn.Module) -> str:
    """What fine-tuning trains, in words, from the parameters' ``requires_grad``: e.g. "adapters + task head
    (1,234 of 56,789 parameters); frozen: encoder"."""
    params = dict(model.named_parameters())
    trainable = {name for name, p in params.items() if p.requires_grad}
    table = input_languages(model)
    adapters = {name for name in params if ".adapter." in name}
    encoder = {
        name
        for name in params
        if name.startswith(model.base_model_prefix + ".")
        and ".adapter." not in name
        and ".input_languages." not in name
    }
    groups = {
        "encoder": encoder,
        "adapters": adapters,
        "task head": {name for name in params if not name.startswith(model.base_model_prefix + ".")},
    }
    trained = [label for label, names in groups.items() if names and names <= trainable]
    frozen = [label for label, names in groups.items() if names and not names & trainable]
    text = (
        " + ".join(trained) + f" ({sum(params[name].numel() for name in trainable):,} of "
        f"{sum(p.numel() for p in params.values()):,} parameters)"
    )
    if frozen:
        text += f"; frozen: {', '.join(frozen)}"
    if table is not None:
        text += f"; input language embeddings added and frozen ({', '.join(table.languages)})"
    return text


def evaluate(
    model: torch.nn.Module,
    task: type[TransferTask],
    features: list[dict],
    pad_id: int,
    rank: int,
    world: int,
    batch_size: int,
    device: torch.device,
) -> dict[str, float]:
    """The task's metrics on ``features`` (``predict``)."""
    return task.score(predict(model, task, features, pad_id, rank, world, batch_size, device))


def predict(
    model: torch.nn.Module,
    task: type[TransferTask],
    features: list[dict],
    pad_id: int,
    rank: int,
    world: int,
    batch_size: int,
    device: torch.device,
) -> list[tuple]:
    """The task's (gold, predicted) pair of each of ``features``, in their order: this rank predicts examples rank,
    rank + world, ...; all ranks enter."""
    mine = list(range(rank, len(features), world))
    predicted = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(mine), batch_size):
            chunk = mine[start : start + batch_size]
            batch = to_device(collate([features[i] for i in chunk], pad_id), device)
            logits = task.logits(model(**model_inputs(batch)))
            predicted += zip(chunk, task.predictions(logits, batch["labels"], [features[i] for i in chunk]))
    if world > 1:
        shares = [None] * world
        dist.all_gather_object(shares, predicted)
        predicted = [item for share in shares for item in share]
    return [pair for _, pair in sorted(predicted, key=lambda item: item[0])]


def optimizer_and_schedule(model: torch.nn.Module, s: FineTuneSettings, total_steps: int):
    """XTREME's AdamW (ε 1e-8) over the trainable parameters and its linear schedule."""
    from transformers import get_linear_schedule_with_warmup

    groups = parameter_groups(model, s.weight_decay)
    for group in groups:
        group.pop("adapt", None)  # LAMB's option
    optimizer = torch.optim.AdamW(groups, lr=s.lr, eps=1e-8)  # XTREME's adam_epsilon
    return optimizer, get_linear_schedule_with_warmup(optimizer, s.warmup_steps, total_steps)


def epoch_batches(examples: int, batch_size: int, world: int) -> list[tuple[int, int]]:
    """(start, stop) in an epoch's order of each optimizer step's global batch: the full batches, then the rest as
    one smaller batch (XTREME's scripts and the HF Trainer keep it), cut to a multiple of the worker count so every
    rank takes an equal share and all ranks take the same number of steps (DDP's all-reduce would wait forever for
    a rank that had no step). Each rank's loss is the mean over its share, so equal shares make DDP's average the
    batch's mean; at most ``world - 1`` examples an epoch are left out, none on one worker."""
    full, rest = divmod(examples, batch_size)
    rest -= rest % world
    bounds = [(index * batch_size, (index + 1) * batch_size) for index in range(full)]
    return bounds + ([(full * batch_size, full * batch_size + rest)] if rest else [])


def train_step(
    task: type[TransferTask],
    wrapped: torch.nn.Module,
    model: torch.nn.Module,
    optimizer,
    schedule,
    batch: dict[str, torch.Tensor],
) -> torch.Tensor:
    """One optimizer step on ``batch`` (this rank's share): task loss, gradients clipped at 1.0, AdamW, schedule.
    ``wrapped`` is ``model`` or its DDP wrapper. Returns the loss, detached."""
    loss = task_loss(task.logits(wrapped(**model_inputs(batch))), batch["labels"])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), MAX_GRAD_NORM)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def fine_tune(job: FineTuneJob, data: TaskData, pad_id: int, rank: int, world: int, device: torch.device) -> dict:
    """Fine-tune on ``data.train``, keep the weights best on ``data.dev``, score ``data.test``; every rank returns
    the same result (each candidate's dev scores, the one selected, the test scores per language, what was
    trained).

    Candidates: the weights every ``settings.select_every`` optimizer steps and the final ones (XTREME), or the end
    of each epoch with ``select_every`` 0. Ties keep the earlier candidate.
    """
    task, s = TRANSFER_TASKS[job.task], job.settings
    torch.manual_seed(job.seed)  # the new head's initialisation and dropout
    use_tensor_cores(device)
    model = load_model(node_local(job.model_path, job.endpoint_url), task, job.adapter_training).to(device)
    wrapped = (
        torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        if dist.is_initialized()
        else model
    )
    batches = epoch_batches(len(data.train), s.batch_size, world)
    steps_per_epoch = len(batches)
    total = steps_per_epoch * s.epochs
    optimizer, schedule = optimizer_and_schedule(model, s, total)

    def scores(sets: dict[str, list[dict]]) -> dict[str, dict[str, float]]:
        """Each language's set scored with its own row of an input language table (if the model has one)."""
        out = {}
        for lang, features in sets.items():
            with input_language(model, lang):
                out[lang] = evaluate(model, task, features, pad_id, rank, world, job.eval_batch_size, device)
        return out

    history, best, losses = [], {"selection": float("-inf")}, []
    best_state = None
    started, step = time.time(), 0
    for epoch in range(1, s.epochs + 1):
        model.train()
        order = np.random.default_rng([job.seed, epoch]).permutation(len(data.train))  # same on every rank
        for index, (start, stop) in enumerate(batches):
            mine = order[start:stop][rank::world]
            batch = to_device(collate([data.train[i] for i in mine], pad_id), device)
            with input_language(model, job.source):  # the loss stays on the device until a candidate reads it
                losses.append(train_step(task, wrapped, model, optimizer, schedule, batch))
            step += 1
            at_candidate = step % s.select_every == 0 if s.select_every else index == steps_per_epoch - 1
            if at_candidate or step == total:
                dev = scores(data.dev)
                candidate = {
                    "step": step,
                    "epoch": epoch,
                    "train_loss": float(torch.stack(losses).mean()),
                    "dev": dev,
                    "selection": float(np.mean([metrics[task.main_metric] for metrics in dev.values()])),
                }
                history.append(candidate)
                losses = []
                if candidate["selection"] > best["selection"]:
                    best = candidate
                    best_state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
                model.train()
    model.load_state_dict(best_state)
    test, predictions = {}, {}
    for lang, features in data.test.items():
        with input_language(model, lang):
            pairs = predict(model, task, features, pad_id, rank, world, job.eval_batch_size, device)
        test[lang], predictions[lang] = task.score(pairs), task.prediction_rows(pairs)
    return {
        "task": job.task,
        "seed": job.seed,
        "selected_step": best["step"],
        "selected_epoch": best["epoch"],
        "history": history,
        "test": test,
        "steps": total,
        "workers": world,
        "seconds": time.time() - started,
        "settings": asdict(s),
        "trained": trained_parameters(model),
        "predictions": predictions,
    }


def train_loop_per_worker(config: dict) -> None:
    """Ray Train's worker function: ``config`` holds the ``FineTuneJob``, the pad id and ``[ref]`` to the
    ``TaskData`` in the object store; rank 0 hands the result back as a checkpoint holding its JSON (Ray Train
    keeps only metrics reported with a checkpoint)."""
    import ray
    import ray.train
    import ray.train.torch

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    data = ray.get(config["data"][0])
    result = fine_tune(config["job"], data, config["pad_id"], rank, world, ray.train.torch.get_device())
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = None
        if rank == 0:
            (Path(tmp) / RESULT_FILE).write_text(json.dumps(result))
            checkpoint = ray.train.Checkpoint.from_directory(tmp)
        ray.train.report({"selected_step": result["selected_step"]}, checkpoint=checkpoint)
