"""Bench studies: ALIGN-MLM's Tables 1 and 2 as Ray Tune studies over ``distalign bench synthetic``'s cells.

A bench study file (a ``bench:`` section instead of ``base:``; its keys are the fields of ``BenchStudyConfig``)::

    study: xlm-parallel-share      # MLflow parent run name; trials are <study>-000, <study>-001, ...
    bench:                         # distalign.synthetic_languages.benchmark.BenchSpec, every trial
      world: 500
      transformations: [translit_inv]
      objectives: [xlm]
      transfer_tasks: [udpos, pawsx]
    grid:                          # BenchSpec fields -> values; every combination is one trial
      parallel_share: [0, 0.1, 0.5, 1.0]
      train_seed: [0, 1, 2]        # seeds: the table gives mean ± std over them

    distalign tune tuning/align_mlm_table1.yaml

Every trial's bench is prepared and checked on the driver (its data written under
``<output_dir>/<trial>``, a directory the cluster's nodes share), then Tune runs the trials side by side as the
cluster's CPUs allow, each running its cells (pre-training, alignment, transfer) with ``run_cell``; the
training runs are child runs of the study's MLflow parent run, which gets the table (``study.md``,
``study.csv``: Δ and alignment, mean ± std over the seeds, per cell and grid value) and the alignment-vs-transfer
scatter (``alignment_vs_transfer.png``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from distalign.config import ConfigError, distalign_home, load_dataclass, read_mapping
from distalign.synthetic_languages.benchmark import BenchSpec, PreparedBench, prepare_bench, run_cell
from distalign.train.trial_resources import concurrent_trials, trial_resources

log = logging.getLogger("distalign")
SEED_KEYS = ("train_seed", "seed")  # grid keys the table averages over
CELL_KEYS = ("transformations", "objectives")  # grid keys each row names already


@dataclass
class BenchStudyConfig:
    study: str = "bench-study"
    bench: BenchSpec = field(default_factory=BenchSpec)
    grid: dict[str, list[Any]] = field(default_factory=dict)
    max_concurrent_trials: int = 0  # 0 = as many as the cluster's CPUs hold (train.trial_resources.concurrent_trials)
    trial_cpus: float = 0.1  # the trial function waits on its TorchTrainer runs
    max_failures: int = 0


def is_bench_study(path: str | Path) -> bool:
    return "bench" in read_mapping(path)


def load_bench_study(
    path: str | Path, overrides: list[str] | None = None
) -> tuple[BenchStudyConfig, dict[str, BenchSpec], dict[str, dict[str, Any]]]:
    """The study, each trial's bench (its grid point applied as ``bench.<key>`` overrides, so a bad key or value
    names it) and what each trial stands for."""
    study = load_dataclass(BenchStudyConfig, path, overrides)
    fields = {f.name for f in dataclasses.fields(BenchSpec)}
    for key, values in study.grid.items():
        if key not in fields or not values:
            raise ConfigError(
                f"grid.{key}: must be a field of the bench ({', '.join(sorted(fields))}) with a "
                "non-empty list of values"
            )
    if not study.grid:
        raise ConfigError("grid: name at least one bench field to vary")
    out = Path(study.bench.output_dir or distalign_home() / "bench_studies" / study.study).resolve()
    specs, points = {}, {}
    for i, values in enumerate(itertools.product(*study.grid.values())):
        name = f"{study.study}-{i:03d}"
        point = dict(zip(study.grid, values))
        specs[name] = load_dataclass(
            BenchStudyConfig,
            path,
            [
                *(overrides or []),
                *(f"bench.{k}={json.dumps(v)}" for k, v in point.items()),
                f"bench.output_dir={json.dumps(str(out / name))}",
            ],
        ).bench
        points[name] = point
    return study, specs, points


def _trial(params: dict[str, Any]) -> None:
    """One trial: every cell of its bench, each reported to Tune as it ends (the rows travel as JSON)."""
    from ray import tune

    trial = params["trial"]
    bench: PreparedBench = trial["bench"]
    rows = []
    for transformation, objective, seed in bench.cells():
        rows.append(run_cell(bench, transformation, objective, seed, trial["parent_id"]))
        numbers = {k: float(v) for k, v in rows[-1].items() if k == "alignment" or k.startswith("delta_")}
        tune.report(numbers | {"rows": json.dumps(rows, default=float)})


def study_cells(rows: pd.DataFrame, grid: list[str], tasks: list[str]) -> pd.DataFrame:
    """Mean ± std over seeds per (transformation, objective, grid value): the objective labelled with the grid
    values that are not seeds, so that the bench's table, ρ and scatter read one cell per configuration."""
    from distalign.synthetic_languages.transfer_study import cell_means

    varied = [k for k in grid if k not in SEED_KEYS + CELL_KEYS]
    labelled = rows.assign(
        objective=[" ".join([r["objective"], *(f"{k}={r[k]}" for k in varied)]) for _, r in rows.iterrows()]
    )
    columns = ["alignment"] + [f"{kind}_{task}" for task in tasks for kind in ("source", "target", "delta")]
    return cell_means(labelled, columns)


def log_bench_study(
    client, parent_id: str, study: BenchStudyConfig, rows: pd.DataFrame, tasks: list[str], out_dir: Path
) -> str:
    from distalign.synthetic_languages import transfer_study

    cells = study_cells(rows, list(study.grid), tasks)
    rho = transfer_study.correlations(cells, tasks)
    text = transfer_study.markdown(cells, tasks, rho, transfer_study.shape_checks(cells, tasks, rho))
    text += "\n" + transfer_study.paper_tables(list(study.grid)) + "\n"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "study.md").write_text(text, encoding="utf-8")
    rows.to_csv(out_dir / "trials.csv", index=False)
    cells.to_csv(out_dir / "study.csv", index=False)
    transfer_study.scatter(cells, tasks, rho, out_dir / "alignment_vs_transfer.png")
    for name in ("study.md", "study.csv", "trials.csv", "alignment_vs_transfer.png"):
        client.log_artifact(parent_id, str(out_dir / name))
    client.log_table(parent_id, data=cells, artifact_file="study.json")
    return text


def run_bench_study(path: str | Path, overrides: list[str] | None = None) -> pd.DataFrame:
    """Prepare every trial's bench on the driver, run them as Tune trials, and log the table to the parent run."""
    import ray
    from ray import tune

    from distalign.logs import configure
    from distalign.ray_session import ensure_ray
    from distalign.tracking import client_for, tracked_run

    configure()
    study, specs, points = load_bench_study(path, overrides)
    benches = {}
    for name, spec in specs.items():
        try:
            benches[name] = prepare_bench(spec)
        except ValueError as error:  # InputError, ConfigError: named by trial, before Ray
            raise ConfigError(f"trial {name} ({points[name]}): {error}") from error
    first = next(iter(benches.values()))
    out_dir = first.out_dir.parent
    tasks = list(first.spec.transfer_tasks)
    log.info(
        "bench study %s: %d trials over %s, %d cell(s) each",
        study.study,
        len(benches),
        list(study.grid),
        len(first.cells()),
    )
    ensure_ray()
    max_concurrent = concurrent_trials(study, [first.probe], ray.cluster_resources())
    log.info(
        "bench study %s: up to %d trials at once, each holding %s",
        study.study,
        max_concurrent,
        trial_resources(study, first.probe),
    )
    uri, experiment = first.probe.tracking.uri, first.probe.tracking.experiment
    with tracked_run(
        uri,
        experiment,
        study.study,
        str(out_dir),
        {f"grid.{k}": v for k, v in study.grid.items()},
        dataclasses.asdict(study),
    ) as parent_id:
        space = [{"bench": bench, "parent_id": parent_id, "name": name} for name, bench in benches.items()]
        tuner = tune.Tuner(
            tune.with_resources(_trial, {"cpu": study.trial_cpus}),
            param_space={"trial": tune.grid_search(space)},
            tune_config=tune.TuneConfig(max_concurrent_trials=max_concurrent),
            run_config=tune.RunConfig(
                name=study.study,
                storage_path=str(out_dir / "tune"),
                failure_config=tune.FailureConfig(max_failures=study.max_failures),
            ),
        )
        results = tuner.fit()
        rows, failed = [], []
        for result in results:
            name = result.config["trial"]["name"]
            if result.error or not result.metrics:
                failed.append(name)
                continue
            rows += [{"trial": name, **points[name], **row} for row in json.loads(result.metrics["rows"])]
        if rows:
            table = pd.DataFrame(rows).sort_values(["trial", "transformation", "objective", "seed"])
            text = log_bench_study(client_for(uri), parent_id, study, table, tasks, out_dir)
            print("\n" + text, flush=True)
        if failed:
            raise RuntimeError(f"bench study {study.study}: trials failed: {sorted(failed)}")
    return pd.DataFrame(rows)
