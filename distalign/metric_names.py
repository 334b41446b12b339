"""Every MLflow metric name distalign logs, as patterns: the one list the reference page
(``docs/reference/metrics.md``, ``python -m distalign.tools.reference``) is written from.

A pattern is a name with ``<placeholders>``, each standing for one part of a name without ``/`` (an
objective, a language pair, a phase). Code that logs a new kind of metric adds its pattern here: a
test compares the names a real training run logs with ``METRICS`` (``tests/train/test_training_integration.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class MetricFamily:
    pattern: str  # e.g. Train/<objective>_loss
    meaning: str
    regex: re.Pattern = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = re.split(r"<[^<>/]+>", self.pattern)
        object.__setattr__(self, "regex", re.compile("[^/]+".join(re.escape(p) for p in parts)))

    def matches(self, name: str) -> bool:
        return self.regex.fullmatch(name) is not None


@dataclass(frozen=True)
class RunKind:
    title: str  # which runs log these (a heading of the reference page)
    about: str  # when and at which step
    families: tuple[MetricFamily, ...]


M = MetricFamily
# The training metrics' prefix has a capital because MLflow's run page orders its chart sections by the prefix's
# characters, capitals first: the losses come before data/, eval/, perf/ and startup/ (tests/test_mlflow_ui.py).
TRAINING = RunKind(
    "Training runs",
    "`distalign train`, `jobs/train.py` and every trial of `distalign tune`: one MLflow run per training run. "
    "`Train/` and `perf/` are logged every `train.log_every` steps, `eval/` at every in-loop evaluation "
    "(`eval.every`, and step 0 for the starting model).",
    (
        M(
            "Train/loss",
            "the total loss, the weighted sum of the active objectives' losses: mean over the steps since "
            "the last log and over the workers",
        ),
        M(
            "Train/<objective>_loss",
            "one active objective's loss (`objectives.<objective>`) before its weight, averaged as Train/loss",
        ),
        M("Train/grad_norm", "the gradients' global norm before clipping"),
        M("Train/lr", "the learning rate of the step (after warm-up and schedule)"),
        M("perf/step_ms", "wall time of an optimizer step, mean over the window"),
        M(
            "perf/<phase>_ms",
            "the step's time in one phase: data_wait (waiting for the batches), forward_backward, optimizer",
        ),
        M("perf/allreduce_ms", "DDP: the gradient all-reduce's time in the latest sampled step"),
        M("perf/allreduce_exposed_ms", "DDP: the part of the all-reduce not overlapped with the backward pass"),
        M("perf/tokens_per_s", "tokens trained per second, all workers"),
        M("perf/tokens_per_s_per_worker", "tokens trained per second, one worker (mean over workers)"),
        M("perf/sequences_per_s", "sequences trained per second, all workers"),
        M("perf/sequences_per_s_per_worker", "sequences trained per second, one worker (mean over workers)"),
        M("perf/padding_share", "share of the batches' positions that are padding (`data.pack_sequences` fills them)"),
        M("perf/mfu", "model FLOPs utilisation: the model's FLOP/s over the device's peak (GPUs whose peak is known)"),
        M("perf/peak_memory_gib", "peak GPU memory allocated (GPU runs)"),
        M(
            "startup/<phase>_s",
            "seconds of one start-up phase, logged at the first step: imports, prepare, ray, "
            "trainer, workers, model, vanilla_eval, first_batch, first_step",
        ),
        M("startup/total_s", "seconds from the command's start to the end of the first optimizer step"),
        M("data/skipped_corpus_rows", "corpus rows skipped as malformed"),
        M("data/corpus_read_retries", "corpus reads retried after a storage error"),
        M("eval/bli/<pair>/mrr", "in-loop BLI mean reciprocal rank on a language pair's held-out dictionary pairs"),
        M("eval/bli/avg/mrr", "the mean of `eval/bli/<pair>/mrr` over the pairs"),
        M(
            "eval/selection/rel_mrr_gain",
            "BabelBERT's model-selection score: mean relative MRR gain over the "
            "starting model (0 at step 0); ranks checkpoints with `eval.select_by: bli`",
        ),
        M(
            "eval/mlm/loss",
            "the MLM loss on the held-out sentences (`data.validation_corpora`); ranks checkpoints "
            "with `eval.select_by: mlm_loss`",
        ),
        M("eval/mlm/<lang>/loss", "the held-out MLM loss of one language"),
        M(
            "test/bli/<pair>/mrr",
            "BLI MRR of a test-language pair (`eval.test_languages`), scored once after "
            "training from the selected checkpoint",
        ),
        M("test/bli/avg/mrr", "the mean of `test/bli/<pair>/mrr`"),
        M("test/step", "the step of the checkpoint the `test/` scores come from"),
        M(
            "system/<node>/<name>",
            "a node's CPU, memory, disk, network and GPU use (MLflow's system-metrics "
            "monitors), every `tracking.system_metrics_every_s` seconds",
        ),
    ),
)
TRANSFER = RunKind(
    "Zero-shot transfer",
    "`distalign transfer`, `distalign eval --tasks <transfer task>` and `eval.transfer` after training: logged into "
    "the model's training run at its step (or a run of its own); the fine-tuning runs are child runs of it.",
    (
        M(
            "transfer/<task>/<lang>/<metric>",
            "test score of a language, mean over seeds (`avg` for the mean over the "
            "target languages); `delta` is the gap to the source language",
        ),
        M("transfer/<task>/<lang>/<metric>_std", "its standard deviation over seeds"),
        M("transfer/<task>/dev/selection", "fine-tuning child run: the dev score that selects the kept weights"),
        M("transfer/<task>/dev/<lang>/<metric>", "fine-tuning child run: a dev-set score"),
        M("transfer/<task>/train_loss", "fine-tuning child run: the training loss"),
    ),
)
EVALUATION = RunKind(
    "Evaluation runs",
    "`distalign eval`: every task scored at every layer; the values at the chosen layer (`--layer`, else the best "
    "layer of each task and metric).",
    (
        M(
            "eval/<task>/<pair>/<metric>",
            "a task's score on a language pair (bli: mrr, p_at_1, p_at_5, p_at_10, oov; "
            "xlsim: spearman; tatoeba: acc, acc_to_eng, acc_from_eng; "
            "word_alignment: score)",
        ),
        M("eval/<task>/avg/<metric>", "the mean over the task's pairs"),
        M("eval/<task>/best_layer/<metric>", "the layer whose pair-averaged score is best"),
    ),
)
STUDY = RunKind(
    "Study parent runs",
    "`distalign tune`: the study's parent run, logged once its trials end (each trial is a training run above).",
    (
        M("best/<metric>", "the best trial's value of the study's `metric` (its name follows `best/`)"),
        M("study/trial_startup_s_mean", "mean seconds from a trial's start to its first step"),
        M("study/trial_wall_s_mean", "mean wall time of a trial"),
        M("study/trial_startup_share", "share of the trials' wall time spent starting up"),
        M("study/startup/<phase>_s", "mean of the trials' `startup/<phase>_s`"),
        M(
            "study/spearman_<factor>",
            "language samples: Spearman correlation of the score with d_typ or sim_train_test",
        ),
        M("study/spearman_<factor>_p", "its p-value"),
    ),
)
BENCH = RunKind(
    "Benchmark runs",
    "`distalign bench synthetic` (a training run per cell, under a parent run) and `distalign bench perf`.",
    (
        M(
            "bench/<score>",
            "a synthetic-bench cell's run: alignment, alignment_tokens, bli_mrr_best, "
            "word_alignment_best, transfer deltas",
        ),
        M("bench/<transformation>/<objective>/<score>", "synthetic bench parent run: a cell's mean over seeds"),
        M("bench/<transformation>/<objective>/<score>_std", "its standard deviation over seeds"),
        M(
            "bench/table8_pattern_holds",
            "1 when ALIGN-MLM's Table 8 pattern holds in the cells, else 0 (not logged "
            "when no check applies to the cells run)",
        ),
        M("bench/spearman/<task>", "Spearman correlation of the alignment score with transfer"),
        M("bench/spearman_p/<task>", "its p-value"),
        M("bench/shape_holds", "1 when the transfer checks hold, else 0 (not logged when no check applies)"),
        M(
            "<area>/<figure>",
            "`distalign bench perf`: each row's figures (step, bli, startup, trial, run, data, gpu, "
            "finetune), as its results.md explains",
        ),
    ),
)
METRICS: tuple[RunKind, ...] = (TRAINING, TRANSFER, EVALUATION, STUDY, BENCH)


def family_of(name: str, kinds: tuple[RunKind, ...] = METRICS) -> MetricFamily | None:
    """The first family of ``kinds`` whose pattern matches the metric ``name``."""
    return next((f for kind in kinds for f in kind.families if f.matches(name)), None)
