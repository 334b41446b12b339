"""The per-worker training loop run by Ray Train (one copy per worker process).

Each step draws one batch from every active stream (constraints, corpus), masks the corpus batch,
and lets the engine run forward/backward/step on the weighted objective sum. Rank 0 prints
progress and logs to MLflow; all ranks save checkpoints (DeepSpeed shards) and report to Ray Train.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Iterator

import ray.train
import torch
import torch.distributed as dist

from distalign.config import ExperimentConfig, from_dict
from distalign.eval.bli_task import SELECTION_METRIC, evaluate_bli, pair_mrrs, relative_mrr_gain
from distalign.eval.tasks import BLITask
from distalign.models.alignment_model import AlignmentModel
from distalign.models.adapters import add_bottleneck_adapters, adapter_state_dict, load_masked_lm_with_adapters
from distalign.models.loading import load_tokenizer
from distalign.objectives.registry import ObjectiveContext, build_objectives
from distalign.tracking import MetricLogger
from distalign.train.checkpoint import MODEL_DIR, TrainerState, load_objective_state, read_state, save_checkpoint
from distalign.train.engine import build_engine
from distalign.train.masking import build_corpus_masker


def endless_batches(name: str, batch_size: int) -> Iterator[dict[str, torch.Tensor]]:
    """Batches of this worker's shard, epoch after epoch (equal shards keep ranks in step)."""
    shard = ray.train.get_dataset_shard(name)
    while True:
        empty = True
        for batch in shard.iter_torch_batches(batch_size=batch_size, drop_last=True):
            empty = False
            yield batch
        if empty:
            raise ValueError(f"dataset '{name}' has fewer rows per worker than one batch of {batch_size}")


def _mean_across_ranks(values: dict[str, float]) -> dict[str, float]:
    if not dist.is_available() or not dist.is_initialized():
        return values
    keys = sorted(values)
    t = torch.tensor([values[k] for k in keys], dtype=torch.float64)
    dist.all_reduce(t)
    return {k: v / dist.get_world_size() for k, v in zip(keys, t.tolist())}


def train_loop_per_worker(loop_config: dict) -> None:
    config: ExperimentConfig = from_dict(ExperimentConfig, loop_config["config"])
    t, ctx = config.train, ray.train.get_context()
    eval_every = loop_config["eval_every"]
    rank = ctx.get_world_rank()
    is_chief = rank == 0
    model_path = loop_config["model_path"]

    state, resumed_dir = TrainerState(mlflow_run_id=loop_config["mlflow_run_id"]), None
    checkpoint = ray.train.get_checkpoint()
    with tempfile.TemporaryDirectory() as tmp:
        if checkpoint is not None:
            resumed_dir = Path(checkpoint.to_directory(str(Path(tmp) / "resume")))
            saved = read_state(resumed_dir)
            # the vanilla scores stay the reference for model selection across resumes
            state.step, state.baseline_mrr = saved.step, saved.baseline_mrr
            model_path = str(resumed_dir / MODEL_DIR)
        torch.manual_seed(t.seed)
        tokenizer = load_tokenizer(loop_config["model_path"])
        masked_lm = load_masked_lm_with_adapters(model_path)  # a resumed adapter run brings its adapters
        adapters = config.model.adapters
        if adapters.enabled and not adapter_state_dict(masked_lm):
            add_bottleneck_adapters(masked_lm, adapters.reduction_factor, adapters.non_linearity)
        objectives, weights = build_objectives(config.objectives, ObjectiveContext(
            masked_lm, tokenizer, loop_config["languages"], loop_config["dictionary"], t.seed))
        model = AlignmentModel(masked_lm, objectives, weights, config.model.word_layer)
        if resumed_dir is not None:
            load_objective_state(model, resumed_dir)
        engine = build_engine(model, t, uses_lm_head="mlm" in weights)
        if resumed_dir is not None:
            engine.load(resumed_dir)

    logger = MetricLogger(config.tracking.uri, state.mlflow_run_id) if is_chief else None
    test_sets = [BLITask(**ts) for ts in loop_config["bli_test_sets"]]

    def evaluate() -> dict[str, float]:
        with engine.full_weights():
            metrics = evaluate_bli(engine.module, tokenizer, test_sets, config.model.max_word_tokens,
                                   config.model.word_layer)
        if metrics:
            if not state.baseline_mrr:  # the vanilla model (step 0) is the reference for model selection
                state.baseline_mrr = pair_mrrs(metrics)
            metrics[SELECTION_METRIC] = relative_mrr_gain(pair_mrrs(metrics), state.baseline_mrr)
        if is_chief and metrics:
            logger.log(metrics, state.step)
            print(f"[distalign] step {state.step} eval " + " ".join(f"{k}={v:.4f}" for k, v in metrics.items()),
                  flush=True)
        return metrics

    if is_chief:
        print(f"[distalign] {'resuming at' if resumed_dir else 'starting'} step {state.step}/{t.max_steps} "
              f"on {ctx.get_world_size()} workers ({t.engine}, zero={t.zero_stage}, {t.precision})", flush=True)
    last_eval = evaluate()  # the vanilla model's scores, or where a resumed run stands

    mask_corpus, masking = build_corpus_masker(config.objectives, tokenizer, config.data.max_seq_length,
                                               loop_config["dictionary"], loop_config["languages"])
    if is_chief and "corpus" in config.objectives.streams():
        print(f"[distalign] {masking}", flush=True)
    batch_sizes = {"constraints": t.constraint_batch_size, "corpus": t.corpus_batch_size,
                   "static": t.static_batch_size}
    streams = {name: endless_batches(name, batch_sizes[name]) for name in sorted(config.objectives.streams())}
    running: dict[str, float] = {}
    started, first_step = time.time(), state.step

    while state.step < t.max_steps:
        batch = {name: next(stream) for name, stream in streams.items()}
        if "corpus" in batch:
            generator = torch.Generator().manual_seed(t.seed * 1_000_003 + rank * 7919 + state.step)
            batch["corpus"] = mask_corpus(batch["corpus"], generator)
        losses = engine.step(batch)
        for objective in engine.module.objectives.values():
            if hasattr(objective, "update_state"):  # training state outside the optimizer (sense centres):
                objective.update_state()  # a collective over all ranks, once per step
        state.step += 1
        for name, value in losses.items():
            key = "train/loss" if name == "loss" else f"train/{name}_loss"
            running[key] = running.get(key, 0.0) + float(value.detach())

        if state.step % t.log_every == 0 or state.step == t.max_steps:
            count = t.log_every if state.step % t.log_every == 0 else state.step % t.log_every
            metrics = _mean_across_ranks({k: v / count for k, v in running.items()})
            metrics["train/lr"] = engine.lr
            running = {}
            if is_chief:
                logger.log(metrics, state.step)
                rate = (state.step - first_step) / max(time.time() - started, 1e-9)
                print(f"[distalign] step {state.step}/{t.max_steps} loss {metrics['train/loss']:.4f} "
                      f"({rate:.2f} steps/s)", flush=True)
        eval_now = (eval_every and state.step % eval_every == 0) or state.step == t.max_steps
        if eval_now:
            last_eval = evaluate()
        # with epoch-based evaluation every evaluated model is a candidate for the best checkpoint
        if state.step % t.checkpoint_every == 0 or state.step == t.max_steps or (eval_now and config.eval.every_epochs):
            with tempfile.TemporaryDirectory() as tmp:
                save_checkpoint(Path(tmp), engine, tokenizer, state, rank)
                ray.train.report({"step": state.step, **last_eval},
                                 checkpoint=ray.train.Checkpoint.from_directory(tmp))
    if is_chief and state.step >= t.max_steps:
        print(f"[distalign] finished at step {state.step}", flush=True)

