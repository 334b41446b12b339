"""Measured speed: ``distalign bench perf``, each row distalign against an anchor timed in the same run.

    distalign bench perf                      # ~5 minutes on 2 CPU cores
    distalign bench perf --steps 40 --output-dir /tmp/perf
    distalign bench perf --rows gpu --no-mlflow  # a GPU node: torch, transformers and DeepSpeed suffice

Rows (ratios, not absolute times, are what carry from machine to machine):

1. **Step overhead**: ``TrainingRecipe.step`` (DDP engine, objectives, clipping, schedule) against a
   bare PyTorch loop that a user would write for the same model, batches and objectives (MLM +
   lexical InfoNCE, AdamW, clipping): in one process, and in two ``torch.distributed`` gloo processes
   (distalign's DDP engine against a bare ``DistributedDataParallel`` loop). Both sides run
   interleaved in rounds on the same pre-built batches, one thread per process.
2. **Start-up**: ``distalign train`` on the quickstart as a subprocess: wall time from the command to
   the first optimizer step and its phases (``distalign.train.startup``); per Tune trial: the quickstart
   study's four trials (1 worker each), the first wave on a cold cluster and the trials after it apart
   (``trial_overhead``).
3. **Real run**: ``distalign train`` on the quickstart with 1 and 2 workers (300 steps) as a subprocess,
   wall and CPU time per step over steps 100-300 (between its console lines; CPU: every process of
   the run) against the plain PyTorch script a user would write instead (``distalign.tools.bench.plain_script``:
   a ``DataLoader`` worker with ``DataCollatorForLanguageModeling``, MLM + InfoNCE, AdamW; 1 process, or
   2 DDP processes) on the same model and data, run before and after; the run's phases
   (``distalign.train.step_timing``: data wait, forward+backward, optimizer, all-reduce) and padding
   share say where the difference goes.
4. **Data path**: batches per second Ray Data delivers to a consumer that does nothing (the constraint
   stream; the corpus stream of a 2-worker run), against the batches per second the step consumes.
5. **Evaluation**: BLI ranking of 2,000 queries against a 100,000-word vocabulary at every layer of
   the quickstart model (given random vectors): ``distalign.eval.bli_metrics.gold_ranks`` against the
   BabelBERT authors' method as they describe it (per query, rank the whole vocabulary in a
   dataframe and look the translation up), on a sample of the queries: same ranks, time per query.
6. **GPU** (``distalign.tools.bench.gpu``): tokens/s and model FLOPs utilisation (``distalign.train.model_flops``) of
   an XLM-R-base-sized model with MLM + lexical InfoNCE in bf16 on 64 sequences of 512 tokens, distalign's DDP
   and ZeRO-2 engines against the Hugging Face Trainer on the same batches; without a GPU the row says "not
   measured".
7. **Scaling**: distalign's step time against the number of processes (1, 2) and the batch size,
   with a plot.
7. **Fine-tuning** (``distalign.tools.bench.finetune_speed``): ``distalign transfer``'s fine-tuning step against the
   Hugging Face ``Trainer`` on the same tiny model (XNLI's head), features and batches of 32, in one process.

The table is printed, written to ``<output-dir>/results.md`` and logged to MLflow (experiment
``distalign-bench``) with the plot.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from distalign.tools.bench.bare_loop import BareObjectives, bare_step

QUICKSTART = Path(__file__).resolve().parents[3] / "jobs" / "configs" / "quickstart.yaml"
BATCH_SIZES = (16, 32, 64)  # constraint pairs per worker per step (the corpus batch is half)
BLI_QUERIES, BLI_VOCABULARY, AUTHORS_SAMPLE = 2000, 100_000, 100


@dataclass
class Row:
    area: str
    measure: str
    distalign: str
    anchor: str
    ratio: str
    goal: str
    note: str = ""


@dataclass
class PerfReport:
    rows: list[Row] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    scaling: list[dict[str, Any]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- step timing


def _prepared(home: Path, overrides: list[str]):
    from distalign.config import load_config
    from distalign.preparation.inputs import prepare_data

    config = load_config(QUICKSTART, ["run.name=bench-perf", f"storage.path={home / 'runs'}", *overrides])
    return config, prepare_data(config)


def _batches(config, prepared, count: int) -> list[dict[str, dict[str, torch.Tensor]]]:
    from distalign.preparation.ray_streams import local_streams

    streams = local_streams(prepared, config)
    return [{name: next(stream) for name, stream in streams.items()} for _ in range(count)]


def time_steps(home: Path, overrides: list[str], steps: int, rounds: int = 3) -> dict[str, float]:
    """Seconds per step of distalign's recipe and of the bare loop in this process's process group,
    interleaved over ``rounds`` (after a warm-up of each), on the same batches."""
    from distalign.models.loading import load_masked_lm
    from distalign.train.recipe import TrainingRecipe
    from distalign.train.trainer import plan_training

    config, prepared = _prepared(home, overrides)
    batches = _batches(config, prepared, 8)
    recipe = TrainingRecipe(plan_training(config, prepared, ""), dist.get_rank(), dist.get_world_size())
    recipe.setup()
    bare = BareObjectives(load_masked_lm(prepared.model_path), config.objectives["lexical"].temperature)
    if dist.get_world_size() > 1:
        bare = nn.parallel.DistributedDataParallel(bare)
    optimizer = torch.optim.AdamW(bare.parameters(), lr=config.train.lr, weight_decay=config.train.weight_decay)
    runs: dict[str, Callable[[dict], None]] = {
        "distalign": lambda b: recipe.step([b]),
        "bare": lambda b: bare_step(bare, optimizer, b),
    }
    seconds = dict.fromkeys(runs, 0.0)
    for run in runs.values():  # warm-up: first-call allocations, DDP's first bucket rebuild
        for i in range(3):
            run(batches[i])
    for _ in range(rounds):
        for name, run in runs.items():
            dist.barrier()
            start = time.perf_counter()
            for i in range(steps):
                run(batches[i % len(batches)])
            seconds[name] += time.perf_counter() - start
    return {name: total / (rounds * steps) for name, total in seconds.items()}


def in_fresh_processes(worker: Callable[..., Any], args: tuple, processes: int = 1) -> Any:
    """``worker(rank, *args, scratch)`` in ``processes`` spawned processes (a process group, DeepSpeed's state
    and thread settings of their own); rank 0 returns its result by writing JSON to ``scratch/result.json``."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as scratch:
        mp.spawn(worker, args=(*args, scratch), nprocs=processes, join=True)
        return json.loads((Path(scratch) / "result.json").read_text())


def _process_group_worker(rank: int, world: int, home: str, plans: list[dict], scratch: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{scratch}/init", rank=rank, world_size=world)
    try:
        results = [plan | time_steps(Path(home), plan["overrides"], plan["steps"]) for plan in plans]
        if rank == 0:
            (Path(scratch) / "result.json").write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


def step_timings(home: Path, world: int, plans: list[dict]) -> list[dict]:
    """``time_steps`` for each plan in ``world`` fresh gloo processes (one thread each)."""
    for plan in plans:  # here, once: under a process group transformers would save the tiny model on rank 0 only
        _prepared(home, plan["overrides"])
    return in_fresh_processes(_process_group_worker, (world, str(home), plans), world)


def batch_overrides(pairs: int, workers: int) -> list[str]:
    return [
        f"train.constraint_batch_size={pairs}",
        f"train.corpus_batch_size={pairs // 2}",
        f"train.num_workers={workers}",
        "train.max_steps=400",
        "eval.every=0",
    ]


# ---------------------------------------------------------------------------------------------- start-up


def _client(home: Path):
    from mlflow.tracking import MlflowClient

    return MlflowClient(f"sqlite:///{home / 'mlflow.db'}")


def _command_env(home: Path) -> dict[str, str]:
    """A ``distalign`` subprocess's environment: ``home`` as DISTALIGN_HOME, on a local Ray of its own."""
    env = {**os.environ, "DISTALIGN_HOME": str(home)}
    env.pop("RAY_ADDRESS", None)
    return env


def logged_run(home: Path, run_name: str):
    """The MLflow run named ``run_name`` in ``home``'s store."""
    client = _client(home)
    (run,) = client.search_runs(
        [client.get_experiment_by_name("distalign").experiment_id], f"attributes.run_name = '{run_name}'"
    )
    return run


def distalign_command(home: Path, args: list[str], run_name: str):
    """``distalign <args>`` as a subprocess on local Ray with ``home`` as DISTALIGN_HOME; returns the MLflow
    run named ``run_name`` that it logged."""
    done = subprocess.run(
        [sys.executable, "-m", "distalign.cli", *args],
        env=_command_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode:  # the command's own words, not only its exit status
        raise RuntimeError(f"distalign {' '.join(args)} exited with {done.returncode}:\n{done.stderr[-4000:]}")
    return logged_run(home, run_name)


def startup_figures(home: Path) -> dict[str, float]:
    """``distalign train`` on the quickstart as a subprocess: its logged start-up phases and its wall time."""
    start = time.time()
    name = f"bench-startup-{time.strftime('%Y%m%d-%H%M%S')}"  # a new run: the same name would resume
    run = distalign_command(
        home,
        ["train", str(QUICKSTART), f"run.name={name}", "train.max_steps=3", "train.checkpoint_every=3", "eval.every=0"],
        name,
    )
    wall = time.time() - start
    return {k: v for k, v in run.data.metrics.items() if k.startswith("startup/")} | {"wall_s": wall}


TRIAL_GRID = {"train.lr": [1.0e-3, 3.0e-4], "data.max_constraints": [400, 1200]}  # the quickstart study's four


def trial_startup(home: Path) -> dict[str, float]:
    """The quickstart study's four trials (one worker each, 4 steps, as many at once as the CPUs hold) as a
    subprocess: each trial's start-up phases, its first step's time and its end (``trial_overhead``)."""
    import yaml

    name = f"bench-trials-{time.strftime('%Y%m%d-%H%M%S')}"  # a new study: the same name would resume
    study = home / "bench-study.yaml"
    study.write_text(
        yaml.safe_dump(
            {
                "study": name,
                "base": str(QUICKSTART),
                "overrides": ["train.num_workers=1", "train.max_steps=4", "train.checkpoint_every=4", "eval.every=0"],
                "grid": TRIAL_GRID,
            }
        )
    )
    parent = distalign_command(home, ["tune", str(study)], name)
    client = _client(home)
    trials = []
    for run in client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'"):
        (first_step,) = client.get_metric_history(run.info.run_id, "startup/total_s")  # logged at the first step
        trials.append(
            {
                "start": run.info.start_time / 1000,
                "first_step": first_step.timestamp / 1000,
                "end": run.info.end_time / 1000,
            }
            | {k: v for k, v in run.data.metrics.items() if k.startswith("startup/")}
        )
    return trial_overhead(trials)


def trial_overhead(trials: list[dict[str, float]]) -> dict[str, float]:
    """Where the trials of a study spend their time before their first step, cold and warm.

    ``trials``: per trial its MLflow run's ``start``, ``first_step`` and ``end`` (epoch seconds) and its
    ``startup/*`` metrics. The first wave are the trials whose run started before any trial ended (a cold
    cluster); every later trial takes the place of one that ended, the k-th to reach its first step that of
    the k-th to end, and its ``gap_s`` is from that end to its first step: its start-up, Tune's and Ray Train's
    teardown of the trial before it and the trial actor's start all included. Returns the means of the
    ``startup/*`` metrics for ``first/`` and ``later/`` trials, ``later/gap_s`` and the counts.
    """
    first_end = min(t["end"] for t in trials)
    first = [t for t in trials if t["start"] < first_end]
    later = sorted((t for t in trials if t["start"] >= first_end), key=lambda t: t["first_step"])
    ends = sorted(t["end"] for t in trials)
    out = {"first/trials": float(len(first)), "later/trials": float(len(later))}
    for label, group in (("first", first), ("later", later)):
        keys = {k for t in group for k in t if k.startswith("startup/")}
        out |= {f"{label}/{k}": float(np.mean([t[k] for t in group if k in t])) for k in sorted(keys)}
    if later:
        out["later/gap_s"] = float(np.mean([t["first_step"] - end for t, end in zip(later, ends)]))
    return out


# ---------------------------------------------------------------------------------------------- a real run

PERF_PHASES = ("data_wait", "forward_backward", "optimizer", "allreduce")  # perf/<phase>_ms


def watched_command(home: Path, args: list[str], marks: tuple[int, int]) -> dict[int, tuple[float, float, float]]:
    """``distalign <args>`` as a subprocess on local Ray (as ``distalign_command``), its console read as it runs: at
    the line of each step in ``marks``, (wall time, CPU seconds of its process tree, 1-minute load average). The
    tree holds every process of the run: the driver, Ray's own, the Train workers and the Ray Data tasks."""
    import re

    from distalign.tools.bench.plain_script import tree_cpu_s

    seen = {}
    with subprocess.Popen(
        [sys.executable, "-m", "distalign.cli", *args],
        env=_command_env(home),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    ) as process:
        for line in process.stdout:
            step = re.search(r"\bstep (\d+)/", line)
            if step and int(step.group(1)) in marks:
                seen[int(step.group(1))] = (time.time(), tree_cpu_s(process.pid), os.getloadavg()[0])
    if process.returncode or set(seen) != set(marks):
        raise RuntimeError(
            f"distalign {' '.join(args)}: exit status {process.returncode}, console showed steps "
            f"{sorted(seen)} of {list(marks)}"
        )
    return seen


def real_run_figures(home: Path, steps: int, steady_from: int, workers: int = 1) -> dict[str, float]:
    """``distalign train`` on the quickstart with ``workers`` workers as a subprocess: its ``perf/`` metrics averaged
    over the log windows after step ``steady_from`` (rank-averaged), and, between its console lines of steps
    ``steady_from`` and ``steps``, per step: ``wall_ms`` and ``cpu_ms`` (CPU time of every process of the run);
    ``load``: the load average over the two."""
    name = f"bench-run-{workers}w-{time.strftime('%Y%m%d-%H%M%S')}"  # a new run: the same name would resume
    marks = watched_command(
        home,
        [
            "train",
            str(QUICKSTART),
            f"run.name={name}",
            f"train.num_workers={workers}",
            f"train.max_steps={steps}",
            f"train.checkpoint_every={steps}",
            "eval.every=0",
        ],
        (steady_from, steps),
    )
    client, run = _client(home), logged_run(home, name)
    figures = {}
    for key in ("perf/step_ms", "perf/padding_share", "perf/tokens_per_s", *(f"perf/{p}_ms" for p in PERF_PHASES)):
        values = [m.value for m in client.get_metric_history(run.info.run_id, key) if m.step > steady_from]
        if values:
            figures[key.removeprefix("perf/")] = float(np.mean(values))
    (start, cpu_start, load_start), (end, cpu_end, load_end) = marks[steady_from], marks[steps]
    figures["wall_ms"] = 1e3 * (end - start) / (steps - steady_from)
    figures["cpu_ms"] = 1e3 * (cpu_end - cpu_start) / (steps - steady_from)
    figures["load"] = (load_start + load_end) / 2
    return figures


def plain_script_figures(home: Path, steps: int, steady_from: int, processes: int = 1) -> dict[str, float]:
    """``distalign.tools.bench.plain_script`` on the quickstart's model, pairs and corpus files as a subprocess in
    ``processes`` DDP processes: after step ``steady_from``, its mean wall time per step (``step_ms``), its CPU
    time per step (``cpu_ms``: every rank and DataLoader worker) and the load average while it ran."""
    import pyarrow.parquet as pq

    config, prepared = _prepared(home, [])
    constraints = home / "constraints.parquet"
    pq.write_table(prepared.constraints, constraints)
    corpus = [path for source in prepared.corpus.sources for path in source.paths]
    t = config.train
    load = os.getloadavg()[0]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "distalign.tools.bench.plain_script",
            prepared.model_path,
            str(constraints),
            *corpus,
            "--steps",
            str(steps),
            "--sentences-per-step",
            str(t.corpus_batch_size),
            "--pairs-per-step",
            str(t.constraint_batch_size),
            "--lr",
            str(t.lr),
            "--max-length",
            str(config.model.tiny.max_length),
            "--word-tokens",
            str(config.model.max_word_tokens),
            "--steady-from",
            str(steady_from),
            "--processes",
            str(processes),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    result = json.loads(out.stdout.splitlines()[-1])
    return {
        "step_ms": 1e3 * float(np.mean(result["step_s"][steady_from:])),
        "cpu_ms": 1e3 * result["cpu_s"] / (steps - steady_from),
        "load": (load + os.getloadavg()[0]) / 2,
    }


# ---------------------------------------------------------------------------------------------- data path


def ingest_rates(home: Path, batches: int) -> dict[str, float]:
    """Batches per second the data path delivers to a consumer that does nothing: the quickstart's constraint
    stream (1 worker's batches, read by Ray tasks from the stored table), and one worker's corpus stream of a
    2-worker MLM run; after the first batch (whose wait is the start-up's ``first_batch`` phase)."""
    import ray

    from distalign.data.stream_plugins import STREAMS
    from distalign.preparation.ray_streams import RayWorkerData, corpus_feed, store_tables, table_streams
    from distalign.ray_session import ensure_ray

    ensure_ray()
    rates = {}
    config, prepared = _prepared(home, batch_overrides(32, 1))
    tables = table_streams(prepared, config, store_tables(prepared, config))
    rates["constraints"] = _rate(STREAMS["constraints"].worker_batches(RayWorkerData(0, 1, None, tables), 32), batches)
    config, prepared = _prepared(home, batch_overrides(32, 2) + ["objectives.lexical.weight=0"])
    corpus = STREAMS["corpus"].worker_batches(RayWorkerData(0, 2, corpus_feed(prepared, config)), 16)
    rates["corpus"] = _rate(corpus, batches)
    ray.shutdown()
    return rates


def _rate(stream, batches: int) -> float:
    next(stream)
    start = time.perf_counter()
    for _ in range(batches):
        next(stream)
    return batches / (time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------- evaluation


def authors_ranks(queries: np.ndarray, vocabulary: np.ndarray, words: list[str], gold: list[str]) -> list[int]:
    """BabelBERT's authors' BLI ranking as they describe it: for each query, the cosine to every vocabulary
    word in a dataframe sorted by score, and the translation's position looked up in it."""
    import pandas as pd

    vocabulary = vocabulary / np.linalg.norm(vocabulary, axis=1, keepdims=True)
    ranks = []
    for query, translation in zip(queries, gold):
        scores = vocabulary @ (query / np.linalg.norm(query))
        table = pd.DataFrame({"word": words, "score": scores}).sort_values("score", ascending=False)
        ranks.append(int(np.flatnonzero(table["word"].to_numpy() == translation)[0]) + 1)
    return ranks


def bli_comparison(layers: int, dim: int, seed: int = 0) -> dict[str, float]:
    """Seconds per query of both rankings over every layer, and whether their ranks agree."""
    from distalign.eval.bli_metrics import gold_ranks

    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(BLI_VOCABULARY)]
    ours = theirs = 0.0
    agree = True
    for _ in range(layers):
        vocabulary = rng.standard_normal((BLI_VOCABULARY, dim), dtype=np.float32)
        gold = rng.choice(BLI_VOCABULARY, BLI_QUERIES, replace=False)
        queries = vocabulary[gold] + rng.standard_normal((BLI_QUERIES, dim), dtype=np.float32)  # noisy translations
        start = time.perf_counter()
        # host-side: timed on CPU beside the authors' numpy ranking
        ranks = gold_ranks(torch.from_numpy(queries), torch.from_numpy(vocabulary), torch.from_numpy(gold))
        ours += time.perf_counter() - start
        start = time.perf_counter()
        sample = authors_ranks(queries[:AUTHORS_SAMPLE], vocabulary, words, [words[g] for g in gold[:AUTHORS_SAMPLE]])
        theirs += time.perf_counter() - start
        agree &= ranks[:AUTHORS_SAMPLE].tolist() == sample
    return {
        "distalign_s_per_query": ours / (layers * BLI_QUERIES),
        "authors_s_per_query": theirs / (layers * AUTHORS_SAMPLE),
        "same_ranks": float(agree),
    }


# ---------------------------------------------------------------------------------------------- GPU


def _gpu_worker(rank: int, steps: int, scratch: str) -> None:
    from distalign.tools.bench.gpu import throughput

    (Path(scratch) / "result.json").write_text(json.dumps([vars(t) for t in throughput(steps=steps)]))


def gpu_throughput(steps: int) -> list[dict]:
    """``distalign.tools.bench.gpu.throughput`` in a fresh process (its process group and DeepSpeed's state)."""
    return in_fresh_processes(_gpu_worker, (steps,))


# ---------------------------------------------------------------------------------------------- the bench

# ``--rows``; step includes the scaling rows; run and run2: the real run with 1 and 2 workers (each ~5 minutes here)
AREAS = ("step", "evaluation", "startup", "run", "run2", "data", "gpu", "finetune")


def run_perf_bench(
    output_dir: Path, steps: int = 20, log_to_mlflow: bool = True, areas: tuple[str, ...] = AREAS
) -> PerfReport:
    """The rows of ``areas`` (module docstring); the bench's own runs live under ``<output_dir>/home``, the
    results go to the user's tracking store. ``data`` compares with the step's consumption, so it times the
    steps too."""
    from distalign.config import resolve_tracking_uri
    from distalign.errors import InputError

    unknown = set(areas) - set(AREAS)
    if unknown:
        raise InputError(f"--rows: unknown {', '.join(sorted(unknown))} (choose from {', '.join(AREAS)})")
    output_dir.mkdir(parents=True, exist_ok=True)
    report = _measure(output_dir / "home", steps, areas)
    artifacts = write_results(report, output_dir)
    if log_to_mlflow:
        log_results(report, artifacts, resolve_tracking_uri())
    return report


def _timed(label: str, work: Callable[[], Any]) -> Any:
    print(f"[bench perf] {label} ...", flush=True)
    start = time.time()
    result = work()
    print(f"[bench perf] {label}: {time.time() - start:.0f} s", flush=True)
    return result


def _measure(home: Path, steps: int, areas: tuple[str, ...]) -> PerfReport:
    report = PerfReport()
    if "step" in areas or "data" in areas:
        _step_rows(report, home, steps)
    if "evaluation" in areas:
        _evaluation_row(report)
    if "startup" in areas:
        _startup_rows(report, home)
    for workers, area in ((1, "run"), (2, "run2")):
        if area in areas:
            _real_run_row(report, home, workers)
    if "data" in areas:
        _data_rows(report, home, steps)
    if "gpu" in areas:
        _gpu_rows(report, steps)
    if "finetune" in areas:
        _finetune_row(report, steps)
    if report.scaling:
        _scaling_rows(report)
    return report


def _step_rows(report: PerfReport, home: Path, steps: int) -> None:
    one = _timed(
        "step overhead, 1 process",
        lambda: step_timings(
            home, 1, [{"pairs": p, "overrides": batch_overrides(p, 1), "steps": steps} for p in BATCH_SIZES]
        ),
    )
    two = _timed(
        "step overhead, 2 processes",
        lambda: step_timings(
            home, 2, [{"pairs": p, "overrides": batch_overrides(p, 2), "steps": steps} for p in BATCH_SIZES]
        ),
    )
    report.scaling = [{"processes": 1, **r} for r in one] + [{"processes": 2, **r} for r in two]
    for processes, results in ((1, one), (2, two)):
        main = next(r for r in results if r["pairs"] == 32)
        ratio = main["distalign"] / main["bare"]
        report.metrics[f"step/{processes}p/ratio"] = ratio
        anchor = "bare PyTorch loop" if processes == 1 else "bare DDP gloo loop"
        report.rows.append(
            Row(
                "step overhead",
                f"s/step, quickstart model and batch, {processes} process" + ("es" if processes > 1 else ""),
                f"{main['distalign'] * 1000:.1f} ms",
                f"{main['bare'] * 1000:.1f} ms ({anchor})",
                f"{ratio:.3f}x",
                "<= 1.05x",
            )
        )


def _evaluation_row(report: PerfReport) -> None:
    bli = _timed("BLI ranking", lambda: bli_comparison(layers=3, dim=64))
    speedup = bli["authors_s_per_query"] / bli["distalign_s_per_query"]
    report.metrics |= {f"bli/{k}": v for k, v in bli.items()} | {"bli/speedup": speedup}
    report.rows.append(
        Row(
            "evaluation",
            f"BLI, {BLI_QUERIES:,} queries x {BLI_VOCABULARY:,} words x 3 layers, s per query",
            f"{bli['distalign_s_per_query'] * 1e3:.3f} ms",
            f"{bli['authors_s_per_query'] * 1e3:.1f} ms (authors' method, {AUTHORS_SAMPLE} queries per layer)",
            f"{speedup:.0f}x faster",
            ">= 10x",
            "same ranks" if bli["same_ranks"] else "RANKS DIFFER",
        )
    )


def _startup_rows(report: PerfReport, home: Path) -> None:
    startup = _timed("start-up of distalign train", lambda: startup_figures(home))
    report.metrics |= {f"startup/{k.removeprefix('startup/')}": v for k, v in startup.items()}
    phases = ", ".join(
        f"{k.removeprefix('startup/').removesuffix('_s')} {v:.1f}"
        for k, v in startup.items()
        if k.startswith("startup/") and k != "startup/total_s"
    )
    report.rows.append(
        Row(
            "start-up",
            "command to first optimizer step, quickstart",
            f"{startup['startup/total_s']:.1f} s",
            f"{startup['wall_s']:.1f} s whole command (3 steps)",
            "",
            "<= 30 s",
            phases,
        )
    )
    trials = _timed("start-up per Tune trial", lambda: trial_startup(home))
    report.metrics |= {f"trial/{k.replace('startup/', '')}": v for k, v in trials.items()}
    for label, measure in (("first", "first trials (a cold cluster)"), ("later", "per trial after the first")):
        if not trials.get(f"{label}/trials"):
            continue
        phases = {
            k.removeprefix(f"{label}/startup/").removesuffix("_s"): v
            for k, v in trials.items()
            if k.startswith(f"{label}/startup/") and k != f"{label}/startup/total_s"
        }
        note = ", ".join(f"{name} {v:.1f}" for name, v in sorted(phases.items(), key=lambda p: -p[1]))  # largest first
        gap = trials.get(f"{label}/gap_s")
        report.rows.append(
            Row(
                "start-up",
                f"Tune trial to its first step, {measure}; quickstart study, "
                f"{trials[f'{label}/trials']:.0f} of 4 trials, 1 worker each",
                f"{trials[f'{label}/startup/total_s']:.1f} s",
                f"{gap:.1f} s from the end of the trial before" if gap is not None else "",
                "",
                "<= 5 s" if label == "later" else "",
                note,
            )
        )


def _real_run_row(report: PerfReport, home: Path, workers: int, steps: int = 300, steady_from: int = 100) -> None:
    """``workers`` workers against the plain script in as many processes, run before and after the run (the
    machine's load moves between them: the mean of the two is the anchor, both are in the note)."""
    plain = [
        _timed(
            f"the plain script, {workers} process(es)", lambda: plain_script_figures(home, steps, steady_from, workers)
        )
    ]
    run = _timed(f"a real run, {workers} worker(s)", lambda: real_run_figures(home, steps, steady_from, workers))
    plain.append(plain_script_figures(home, steps, steady_from, workers))
    anchor = {key: float(np.mean([p[key] for p in plain])) for key in ("step_ms", "cpu_ms", "load")}
    ratio, cpu_ratio = run["wall_ms"] / anchor["step_ms"], run["cpu_ms"] / anchor["cpu_ms"]
    report.metrics |= (
        {f"run/{workers}w/{k}": v for k, v in run.items()}
        | {f"run/{workers}w/plain_{k}": v for k, v in anchor.items()}
        | {f"run/{workers}w/ratio": ratio, f"run/{workers}w/cpu_ratio": cpu_ratio}
    )
    where = ", ".join(f"{p.replace('_', ' ')} {run[f'{p}_ms']:.1f} ms" for p in PERF_PHASES if f"{p}_ms" in run)
    before_after = " / ".join(f"{p['step_ms']:.1f}" for p in plain)
    report.rows.append(
        Row(
            "real run",
            f"ms/step, `distalign train` quickstart, {workers} worker{'s' if workers > 1 else ''}, "
            f"steps {steady_from}-{steps}",
            f"{run['wall_ms']:.1f} ms (CPU {run['cpu_ms']:.1f} ms)",
            f"{anchor['step_ms']:.1f} ms (CPU {anchor['cpu_ms']:.1f} ms; plain script, DataLoader"
            + (f", {workers} DDP processes" if workers > 1 else "")
            + ")",
            f"{ratio:.2f}x (CPU {cpu_ratio:.2f}x)",
            "<= 1.10x",
            f"{where}; padding {100 * run['padding_share']:.0f} %; perf/step_ms {run['step_ms']:.1f}; plain script "
            f"{before_after} ms before / after; load {run['load']:.1f} "
            f"(plain {anchor['load']:.1f})",
        )
    )


def _data_rows(report: PerfReport, home: Path, steps: int) -> None:
    """Delivered against consumed: the consumption is the step time of the matching scaling row."""
    rates = _timed("data path", lambda: ingest_rates(home, batches=4 * steps))
    step_s = {(r["processes"], r["pairs"]): r["distalign"] for r in report.scaling}
    consumption = {"constraints": 1 / step_s[1, 32], "corpus": 1 / step_s[2, 32]}
    for stream, label in (
        ("constraints", "constraint stream, quickstart (1 worker)"),
        ("corpus", "corpus stream, 2-worker MLM run (per worker)"),
    ):
        ratio = rates[stream] / consumption[stream]
        report.metrics |= {f"data/{stream}_batches_per_s": rates[stream], f"data/{stream}_ratio": ratio}
        report.rows.append(
            Row(
                "data path",
                f"batches/s, {label}",
                f"{rates[stream]:.0f} delivered",
                f"{consumption[stream]:.1f} consumed by the step",
                f"{ratio:.1f}x",
                ">= 5x",
            )
        )


def _gpu_rows(report: PerfReport, steps: int) -> None:
    if not torch.cuda.is_available():
        report.rows.append(
            Row(
                "GPU",
                "tokens/s and MFU, XLM-R-base size, bf16, DDP and ZeRO-2 vs HF Trainer",
                "-",
                "-",
                "",
                ">= 45 % MFU",
                "not measured: no GPU on this machine",
            )
        )
        return
    from distalign.tools.bench.gpu import Shape

    gpu = _timed("GPU throughput", lambda: gpu_throughput(steps))
    shape = Shape()
    batch = f"{shape.sequences} x {shape.sequence_length} tokens"
    anchor = next(t for t in gpu if t["engine"] == "hf-trainer")
    for t in gpu:
        report.metrics |= {f"gpu/{t['engine']}/tokens_per_s": t["tokens_per_s"]} | (
            {f"gpu/{t['engine']}/mfu": t["mfu"]} if t["mfu"] is not None else {}
        )
    for t in gpu:
        mfu = f"{100 * t['mfu']:.1f} % MFU" if t["mfu"] is not None else "MFU: peak of this GPU unknown"
        is_anchor = t["engine"] == "hf-trainer"
        report.rows.append(
            Row(
                "GPU",
                f"tokens/s, XLM-R-base size, bf16, MLM + lexical, {batch}, {t['engine']} "
                f"({torch.cuda.get_device_name()})",
                f"{t['tokens_per_s']:,.0f}",
                "" if is_anchor else f"{anchor['tokens_per_s']:,.0f} (Hugging Face Trainer)",
                "" if is_anchor else f"{t['tokens_per_s'] / anchor['tokens_per_s']:.2f}x",
                "" if is_anchor else ">= 45 % MFU",
                mfu,
            )
        )


def _finetune_worker(rank: int, steps: int, scratch: str) -> None:
    from distalign.tools.bench.finetune_speed import finetune_step_times

    torch.set_num_threads(1)
    (Path(scratch) / "result.json").write_text(json.dumps(finetune_step_times(steps)))


def _finetune_row(report: PerfReport, steps: int) -> None:
    from distalign.tools.bench.finetune_speed import BATCH

    times = _timed(
        "fine-tuning step vs the Hugging Face Trainer", lambda: in_fresh_processes(_finetune_worker, (steps,))
    )
    ratio, cpu_ratio = times["distalign"] / times["hf_trainer"], times["distalign_cpu"] / times["hf_trainer_cpu"]
    report.metrics |= {f"finetune/{side}_s_per_step": s for side, s in times.items()} | {
        "finetune/ratio": ratio,
        "finetune/cpu_ratio": cpu_ratio,
    }
    # the ratio of CPU times: on a shared machine the wall times swing with the other processes' load
    report.rows.append(
        Row(
            "fine-tuning",
            f"CPU s/step, transfer fine-tuning (XNLI head), tiny model, batch {BATCH}, 1 process, 1 thread",
            f"{times['distalign_cpu'] * 1000:.1f} ms",
            f"{times['hf_trainer_cpu'] * 1000:.1f} ms (Hugging Face Trainer)",
            f"{cpu_ratio:.3f}x",
            "<= 1.05x",
            f"fastest of 5 rounds; wall {times['distalign'] * 1000:.1f} / "
            f"{times['hf_trainer'] * 1000:.1f} ms = {ratio:.3f}x",
        )
    )


def _scaling_rows(report: PerfReport) -> None:
    for processes in (1, 2):
        times = ", ".join(
            f"{r['pairs']}: {r['distalign'] * 1000:.0f} ms" for r in report.scaling if r["processes"] == processes
        )
        report.rows.append(
            Row(
                "scaling",
                f"s/step by pairs per worker, {processes} process" + ("es" if processes > 1 else ""),
                times,
                "",
                "",
                "",
                "scaling.png",
            )
        )


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}, {platform.python_version()}"


def write_results(report: PerfReport, output_dir: Path) -> list[Path]:
    """``results.md`` and, where the steps were timed, ``scaling.png``: the files written."""
    header = ["area", "measure", "distalign", "anchor", "ratio", "goal", "note"]
    lines = [
        f"`distalign bench perf`, {time.strftime('%Y-%m-%d')}, {machine()}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
    ]
    lines += ["| " + " | ".join(str(getattr(row, h)) for h in header) + " |" for row in report.rows]
    text = "\n".join(lines) + "\n"
    (output_dir / "results.md").write_text(text)
    print("\n" + text, flush=True)
    if not report.scaling:
        return [output_dir / "results.md"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    for processes in (1, 2):
        points = [r for r in report.scaling if r["processes"] == processes]
        ax.plot(
            [r["pairs"] for r in points],
            [1000 * r["distalign"] for r in points],
            "o-",
            label=f"distalign, {processes} process{'es' if processes > 1 else ''}",
        )
        ax.plot(
            [r["pairs"] for r in points],
            [1000 * r["bare"] for r in points],
            "x--",
            label=f"bare loop, {processes} process{'es' if processes > 1 else ''}",
        )
    ax.set_xscale("log", base=2)
    ax.set_xticks(BATCH_SIZES, [str(b) for b in BATCH_SIZES])
    ax.set_xlabel("constraint pairs per worker per step (corpus: half)")
    ax.set_ylabel("ms per step")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(output_dir / "scaling.png", dpi=120)
    plt.close(fig)
    return [output_dir / "results.md", output_dir / "scaling.png"]


def log_results(report: PerfReport, artifacts: list[Path], tracking_uri: str) -> None:
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment("distalign-bench")
    with mlflow.start_run(run_name=f"perf-{time.strftime('%Y%m%d-%H%M%S')}"):
        mlflow.log_params({"machine": machine()})
        mlflow.log_metrics(report.metrics)
        for artifact in artifacts:
            mlflow.log_artifact(str(artifact))
