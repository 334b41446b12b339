"""The training recipe one worker runs: set up or resume, step, evaluate, save.

It needs an initialised process group (Ray Train's, or a gloo group of one in tests) and the
batches of every stream it reads, already prepared on the data side: the loop cuts each batch to its
longest row (the streams pad to a fixed width) and a step only moves finished tensors to the device.
Ray itself stays in ``distalign.train.loop``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from distalign import collectives
from distalign.checkpoint import (
    MODEL_DIR,
    TrainerState,
    read_objective_state,
    read_state,
    read_stream_states,
    restore_objective_state,
    restore_rng_state,
    write_rank0_files,
    write_rng_state,
    write_stream_states,
)
from distalign.data.batches import padded_names, trim_padding, with_label_index
from distalign.data.ragged import RaggedRows
from distalign.data.stream_plugins import StreamBatches
from distalign.device import to_device, use_tensor_cores
from distalign.eval.mlm_loss import mlm_loss_metrics, mlm_loss_sums
from distalign.eval.selection import SELECTION_METRIC, evaluate_bli, in_loop_settings, pair_mrrs, relative_mrr_gain
from distalign.logs import duration
from distalign.models.adapters import adapter_state_dict, add_bottleneck_adapters, load_masked_lm_with_adapters
from distalign.models.language_embeddings import training_input_languages
from distalign.models.loading import load_tokenizer
from distalign.objectives.base import ObjectiveContext
from distalign.preparation.prepared import WORD_PAIR_COLUMNS
from distalign.preparation.validation import worker_validation_rows
from distalign.storage import node_local
from distalign.train.engine import build_engine
from distalign.train.model_flops import ModelFlops
from distalign.train.module import TrainingModule
from distalign.train.plan import TrainingPlan
from distalign.train.step_timing import StepTimer, totals

log = logging.getLogger("distalign")
# Widths a GPU step's batches are trimmed to a multiple of: tensor cores take matrix dimensions in multiples of
# 8 (fp16/bf16), and fewer distinct shapes keep the caching allocator's blocks reusable. On CPU: the longest row.
CUDA_WIDTH_MULTIPLE = 8
Batches = dict[str, dict[str, torch.Tensor]]
Report = Callable[[dict[str, float], "Path | None"], None]  # metrics, and a checkpoint directory or None


class RowTrace:
    """``train.trace_rows``: the rows of every step's batches (``row``, and ``epoch`` where the stream has it), one
    JSON line a step, in a file of this worker's own. Each worker group (a start, a restart after a failure) is
    named by rank 0's start time: the steps a later group trains again replace an earlier one's. A line is on
    disk once its step is done (a worker killed after it leaves it)."""

    def __init__(self, directory: str, rank: int, world_size: int):
        group = [f"{time.time():.6f}-{uuid.uuid4().hex[:8]}"]  # sorts by time
        if collectives.initialized():
            dist.broadcast_object_list(group, src=0)
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.file = open(Path(directory) / f"rows.{group[0]}.{rank}.jsonl", "a")
        self.group, self.rank, self.world_size = group[0], rank, world_size

    def write(self, step: int, micro_batches: list[Batches]) -> None:
        streams = {
            name: {
                key: [v for batches in micro_batches for v in batches[name][key].tolist()]
                for key in ("row", "epoch")
                if key in batch
            }
            for name, batch in micro_batches[0].items()
        }
        self.file.write(
            json.dumps(
                {"group": self.group, "step": step, "rank": self.rank, "workers": self.world_size, "streams": streams}
            )
            + "\n"
        )
        self.file.flush()


def mean_across_ranks(values: dict[str, float]) -> dict[str, float]:
    """Each metric's mean over the ranks. The ranks must log the same metrics: a sum of vectors built from
    different keys would mix them, or hang where the vectors' lengths differ, so the keys are compared first."""
    if not collectives.initialized():
        return values
    keys = sorted(values)
    if collectives.distributed():
        everyone: list = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, keys)
        differing = {rank: sorted(set(theirs) ^ set(keys)) for rank, theirs in enumerate(everyone) if theirs != keys}
        if differing:
            raise RuntimeError(
                f"rank {dist.get_rank()} logs metrics other ranks do not (rank: metrics only one side has): {differing}"
            )
    sums = collectives.all_reduce_sum(torch.tensor([values[k] for k in keys], dtype=torch.float64))  # host-side
    return {k: v / dist.get_world_size() for k, v in zip(keys, sums.tolist())}


class CheckpointCadence:
    """When to checkpoint: every ``every_steps`` steps, and (``every_minutes`` > 0) once that long has passed since
    the last checkpoint (or the start). Rank 0's clock decides for every rank (a step's collective: the ranks must
    save together), asked only where minutes are set."""

    def __init__(self, every_steps: int, every_minutes: float):
        self.every_steps, self.every_s = every_steps, every_minutes * 60
        self.last = time.monotonic()

    def due(self, step: int) -> bool:
        if step % self.every_steps == 0:
            return True
        if not self.every_s:
            return False
        late = torch.tensor([float(time.monotonic() - self.last >= self.every_s)])  # host-side: a flag
        return bool(collectives.broadcast_from_first(late).item())  # rank 0's clock decides for every rank

    def saved(self) -> None:
        self.last = time.monotonic()


class TrainingRecipe:
    def __init__(
        self,
        plan: TrainingPlan,
        rank: int = 0,
        world_size: int = 1,
        device: torch.device | None = None,
        system_metrics_node: str = "",
    ):
        """``system_metrics_node``: the name under which this rank logs its node's system metrics (one rank
        per node; "" for the others)."""
        self.plan, self.config = plan, plan.config
        self.rank, self.world_size = rank, world_size
        self.device = device or torch.device("cpu")
        self.is_chief = rank == 0
        self.system_metrics_node = system_metrics_node
        self.state = TrainerState(mlflow_run_id=plan.mlflow_run_id)
        self.resumed = False
        self.stream_states: dict[str, list[dict]] | None = None  # every saved rank's, per stream (a resume)
        self.streams: dict = {}
        self.last_eval: dict[str, float] = {}
        self.validation_rows: RaggedRows | None = None  # this rank's share of the held-out rows, once tokenised
        self.logger = self.system_metrics = None

    # -- set up or resume ------------------------------------------------------------------

    def setup(self, resume_dir: Path | None = None) -> None:
        """Build model, objectives and engine from the plan, or restore them from a checkpoint."""
        config, t = self.config, self.config.train
        model_path = tokenizer_path = node_local(self.plan.model_path, config.storage.endpoint_url)
        if resume_dir is not None:
            saved = read_state(resume_dir)
            # the vanilla scores stay the reference for model selection across resumes
            self.state.step, self.state.baseline_mrr = saved.step, saved.baseline_mrr
            model_path, self.resumed = str(resume_dir / MODEL_DIR), True
            self.stream_states = read_stream_states(resume_dir)
        torch.manual_seed(t.seed)
        use_tensor_cores(self.device)  # fp32 runs and the in-loop evaluation on tensor cores (TF32)
        self.tokenizer = load_tokenizer(tokenizer_path)
        masked_lm = load_masked_lm_with_adapters(model_path)  # a resumed adapter run brings its adapters
        # from_pretrained leaves it in eval mode: pre-training with dropout, as BERT's and the papers'
        masked_lm.train()
        if t.gradient_checkpointing:
            masked_lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        adapters = config.model.adapters
        if adapters.enabled and not adapter_state_dict(masked_lm):
            add_bottleneck_adapters(
                masked_lm, adapters.reduction_factor, adapters.non_linearity, adapters.placement, adapters.init
            )
        active = config.objectives.active()
        # each stream's tensors padded to its width, the ones its preparer adds included
        self.padded = {
            name: padded_names(
                stream.tensors
                + tuple(spec for plugin, _ in active.values() if plugin.stream == name for spec in plugin.prepares)
            )
            for name, stream in self.plan.streams.items()
        }
        self.width_multiple = CUDA_WIDTH_MULTIPLE if self.device.type == "cuda" else 1
        stored_pairs = self.plan.word_pairs  # the constraint table, memory-mapped: its word columns only
        word_pairs = stored_pairs.open().table(list(WORD_PAIR_COLUMNS)) if stored_pairs is not None else None
        context = ObjectiveContext(masked_lm, self.tokenizer, self.plan.languages, word_pairs, t.seed)
        objectives = {name: plugin.build(section, context) for name, (plugin, section) in active.items()}
        model = TrainingModule(masked_lm, objectives, config.objectives.weights(), config.model.word_layer)
        if resume_dir is not None and (objective_state := read_objective_state(resume_dir)) is not None:
            for note in restore_objective_state(model.objectives, objective_state):
                if self.is_chief:
                    log.warning("%s", note)
        uses_lm_head = any(plugin.uses_lm_head for plugin, _ in active.values())
        model_flops = ModelFlops.of(masked_lm)
        self.engine = build_engine(model, t, self.plan.schedule.max_steps, uses_lm_head, self.device)
        for objective in objectives.values():  # their changes to parameters outside a step go through the engine
            objective.edit_parameters = self.engine.edit_parameters
        self.timer = StepTimer(self.device, model_flops, getattr(self.engine, "wrapped", None))
        if resume_dir is not None:
            self.engine.load(resume_dir)
            restore_rng_state(resume_dir, self.rank)  # last: building the model above drew from it
        sampling = self.system_metrics_node and config.tracking.system_metrics_every_s > 0
        if self.plan.mlflow_run_id and (self.is_chief or sampling):
            from distalign.tracking import MetricLogger, SystemMetricsSampler

            self.logger = MetricLogger(config.tracking.uri, self.plan.mlflow_run_id)
            if sampling:
                self.system_metrics = SystemMetricsSampler(
                    self.logger,
                    self.system_metrics_node,
                    lambda: self.state.step,
                    config.tracking.system_metrics_every_s,
                )

    # -- one step, evaluation, checkpoint --------------------------------------------------

    def step(self, micro_batches: list[Batches]) -> dict[str, torch.Tensor]:
        """One optimizer step on ``train.grad_accum_steps`` micro-batches (a batch per stream each); then
        every objective's per-step state hook. The losses stay on the device (detached): reading them on
        the host would wait for the step to finish, so the loop sums them and reads them when it logs."""
        micro_batches = [
            {name: to_device(batch, self.device) for name, batch in batches.items()} for batches in micro_batches
        ]
        losses = self.engine.step(micro_batches, self.timer.mark)
        for objective in self.engine.module.objectives.values():
            objective.after_step()  # may be a collective over all ranks: every rank calls it every step
        self.state.step += 1
        metrics = {("Train/loss" if name == "loss" else f"Train/{name}_loss"): value for name, value in losses.items()}
        return metrics if self.engine.grad_norm is None else metrics | {"Train/grad_norm": self.engine.grad_norm}

    def evaluate(self) -> dict[str, float]:
        """In-loop BLI on the held-out pairs, the MLM validation loss and the model-selection score (all ranks
        enter)."""
        with self.engine.full_weights(), self._input_languages():
            metrics = evaluate_bli(
                self.engine.module,
                self.tokenizer,
                self.plan.bli_test_sets,
                in_loop_settings(self.config.eval, self.config.model, seed=self.config.train.seed),
            )
            if metrics:
                if not self.state.baseline_mrr:  # the vanilla model (step 0) is the reference for model selection
                    self.state.baseline_mrr = pair_mrrs(metrics)
                metrics[SELECTION_METRIC] = relative_mrr_gain(pair_mrrs(metrics), self.state.baseline_mrr)
            if self.plan.mlm_validation is not None:
                metrics.update(self._mlm_validation_loss())
        if self.is_chief and metrics:
            self._log(metrics)
            log.info("step %d eval %s", self.state.step, " ".join(f"{k}={v:.4f}" for k, v in metrics.items()))
        self.last_eval = metrics
        return metrics

    def _input_table(self) -> str | None:
        """The key (in the objectives' state dict) of the input language table the model keeps after training
        (DICT-MLM's), or None."""
        objectives = self.engine.module.objectives.items()
        tables = [
            f"{name}.{objective.exported_input_table}"
            for name, objective in objectives
            if objective.exported_input_table
        ]
        return tables[0] if tables else None

    def _input_languages(self) -> contextlib.AbstractContextManager[None]:
        """The exported input language table added while evaluating, each word set's language its row, as
        ``distalign eval`` adds it to the checkpoint (a no-op without one)."""
        key = self._input_table()
        if key is None:
            return contextlib.nullcontext()
        module = self.engine.module
        return training_input_languages(module.masked_lm, module.objectives.get_parameter(key), self.plan.languages)

    def _mlm_validation_loss(self) -> dict[str, float]:
        """Each rank scores its share of the held-out rows, every world_size-th (tokenised and masked here at the
        first evaluation), all ranks in as many forward passes as rank 0's share (the longest) needs; the summed
        losses and token counts are added up."""
        stored, batch_size = self.plan.mlm_validation, self.config.train.corpus_batch_size
        if self.validation_rows is None:
            self.validation_rows = worker_validation_rows(stored, self.plan.corpus.job, self.rank, self.world_size)
        longest_share = -(-stored.rows // self.world_size)
        sums = mlm_loss_sums(
            self.engine.module.masked_lm,
            self.validation_rows,
            len(self.plan.languages),
            batch_size,
            self.device,
            forwards=-(-longest_share // batch_size),
        )
        return mlm_loss_metrics(collectives.all_reduce_sum(sums), self.plan.languages)

    def save(self, directory: Path) -> None:
        """This rank's part of a checkpoint (the engine's shards on every rank, the rest on rank 0)."""
        self.engine.save(directory, self.rank)
        write_rng_state(directory, self.rank)
        write_stream_states(directory, self.rank, {name: stream.state() for name, stream in self.streams.items()})
        weights = self.engine.exported_weights()  # all ranks enter: ZeRO-3 gathers to rank 0
        if self.is_chief:
            module = self.engine.module
            objective_state = module.objectives.state_dict()  # extra state (the sense state) is not gathered
            if weights is not None:
                objective_state.update(
                    {k.removeprefix("objectives."): v for k, v in weights.items() if k.startswith("objectives.")}
                )
                weights = {k.removeprefix("masked_lm."): v for k, v in weights.items() if k.startswith("masked_lm.")}
            table = self._input_table()
            write_rank0_files(
                directory,
                module.masked_lm,
                self.tokenizer,
                objective_state,
                self.state,
                weights,
                (table, list(self.plan.languages)) if table else None,
                self.config.to_dict(),
            )
        # the manifest (distalign.checkpoint.write_manifest) is written by the upload, off the training thread

    # -- the loop ----------------------------------------------------------------------------

    def run(self, streams: dict[str, StreamBatches], report: Report, checkpoint_dir: Callable[[], Path]) -> None:
        """Train to the schedule's ``max_steps``: log, evaluate and checkpoint on the configured intervals.

        ``streams``: each stream's batches from where the checkpoint resumed from left them
        (``Stream.worker_batches`` given ``stream_states``); ``checkpoint_dir()`` gives an empty directory to save
        into (``WorkerSession.checkpoint_directory``); ``report(metrics, directory)`` hands a saved checkpoint (or
        None) to the runner, which owns the directory from then on.
        """
        if self.is_chief:
            t = self.config.train
            log.info(
                "%s step %d/%d on %d workers (%s, zero=%d, %s, %s attention%s)",
                "resuming at" if self.resumed else "starting",
                self.state.step,
                self.plan.schedule.max_steps,
                self.world_size,
                t.engine,
                t.zero_stage,
                t.precision,
                self.engine.module.masked_lm.config._attn_implementation,
                ", compiled" if t.torch_compile else "",
            )
        self.streams = streams
        try:
            self._train(streams, report, checkpoint_dir)
        finally:
            self._close_tracking()

    def _train(self, streams: dict[str, StreamBatches], report: Report, checkpoint_dir: Callable[[], Path]) -> None:
        t, eval_every, max_steps = self.config.train, self.plan.schedule.eval_every, self.plan.schedule.max_steps
        accum = t.grad_accum_steps
        self.evaluate()  # the vanilla model's scores, or where a resumed run stands
        self.plan.clock.mark("vanilla_eval")
        if self.resumed and self.stream_states is None:  # an older checkpoint: replay the batches trained on
            if self.is_chief:
                log.info("skipping the %d batches per stream trained on before the resume", self.state.step * accum)
            for stream in streams.values():
                for _ in range(self.state.step * accum):
                    next(stream)
        trace = RowTrace(t.trace_rows, self.rank, self.world_size) if t.trace_rows else None
        cadence = CheckpointCadence(t.checkpoint_every, t.checkpoint_every_minutes)
        running: dict[str, torch.Tensor] = {}
        started, first_step = time.time(), self.state.step
        while self.state.step < max_steps:
            self.timer.begin()
            micro_batches = [self.next_batches(streams) for _ in range(accum)]
            self.timer.mark("data_wait")
            self.timer.count(micro_batches)
            fresh_start = self.state.step == 0
            if fresh_start:
                self.plan.clock.mark("first_batch")
            for key, value in self.step(micro_batches).items():
                running[key] = running.get(key, 0.0) + value
            self.timer.end()
            step = self.state.step
            if trace is not None:
                trace.write(step, micro_batches)
            if fresh_start:
                self._log_startup()
            if step % t.log_every == 0 or step == max_steps:
                count = t.log_every if step % t.log_every == 0 else step % t.log_every
                perf = self.timer.read()  # first: on a GPU it waits for the window's steps to finish
                metrics = mean_across_ranks({k: float(v) / count for k, v in running.items()} | perf)
                metrics |= totals(metrics, self.world_size)
                metrics["Train/lr"] = self.engine.lr
                running = {}
                if self.is_chief:
                    self._log(metrics)
                    rate = (step - first_step) / max(time.time() - started, 1e-9)
                    log.info(
                        "step %d/%d loss %.4f (%.2f steps/s, %.0f tokens/s, ETA %s)",
                        step,
                        max_steps,
                        metrics["Train/loss"],
                        rate,
                        metrics.get("perf/tokens_per_s", 0.0),
                        duration((max_steps - step) / max(rate, 1e-9)),
                    )
            eval_now = (eval_every and step % eval_every == 0) or step == max_steps
            if eval_now:
                self.evaluate()
            # with epoch-based evaluation every evaluated model is a candidate for the best checkpoint
            if cadence.due(step) or step == max_steps or (eval_now and self.config.eval.every_epochs):
                directory = checkpoint_dir()
                self.save(directory)
                report({"step": step, **self.last_eval}, directory)
                cadence.saved()
            elif eval_now:  # every evaluation reaches the runner: Tune's early stopping (ASHA) judges each one
                report({"step": step, **self.last_eval}, None)
        if trace is not None:
            trace.file.close()
        if self.is_chief:
            log.info("finished at step %d", self.state.step)

    def next_batches(self, streams: dict[str, StreamBatches]) -> Batches:
        """A batch of every stream, each trimmed to its longest row (``distalign.data.batches.trim_padding``), with
        the flat positions of its labelled tokens where it has labels (``with_label_index``): host work."""
        return {
            name: with_label_index(trim_padding(next(stream), self.padded[name], self.width_multiple))
            for name, stream in streams.items()
        }

    def _log_startup(self) -> None:
        """Where the time to the first optimizer step went (``distalign.train.startup``); not on a resume."""
        self.plan.clock.mark("first_step")
        if self.is_chief:
            self._log(self.plan.clock.phases())
            log.info("start-up: %s", self.plan.clock.summary())

    def _log(self, metrics: dict[str, float]) -> None:
        if self.is_chief and self.logger is not None:
            self.logger.log(metrics, self.state.step)

    def _close_tracking(self) -> None:
        """Stop sampling and send what is still queued (waiting for a tracking server that is away)."""
        if self.system_metrics is not None:
            self.system_metrics.stop()
        if self.logger is not None:
            self.logger.close()
