"""``distalign transfer``: zero-shot cross-lingual transfer of a model, one TorchTrainer run per (task, seed).

    distalign transfer runs/quickstart/checkpoint_... --tasks xnli,udpos --data-dir data/transfer --seeds 3
    distalign transfer xlm-roberta-base --tasks xnli --hub --langs de,fr,sw      # Hub data (needs internet)

What to run is a ``TransferSpec`` (the flags, a ``--spec`` YAML file, dotted ``key=value`` overrides). Every
task's data is read, checked and tokenised on the driver before Ray starts; then each (task, seed) is one Ray
Train run (DDP: gloo on CPU, NCCL with ``use_gpu``), launched from a zero-CPU Ray task so that all of them
are submitted at once and run side by side as far as the cluster's resources allow. Results: the printed
table, ``<output_dir>/summary.csv``, ``per_seed.csv``, ``runs.json`` and the test predictions
(``predictions/<task>/seed<n>/<lang>.jsonl``), and MLflow (a parent run, a child run per fine-tuning holding its
predictions).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from distalign.benchmark_data.home import data_home
from distalign.config import ConfigError, distalign_home, load_dataclass, resolve_path, resolve_tracking_uri
from distalign.data.readers import ReadReport
from distalign.errors import InputError
from distalign.eval.checkpoint_eval import (
    EVALUATED_RUN_TAG,
    EVALUATED_STEP_TAG,
    ModelUnderTest,
    resolve_model,
)
from distalign.eval.tasks.base import comma_list
from distalign.languages import language_code
from distalign.logs import say
from distalign.transfer import protocol
from distalign.transfer.data import read_split
from distalign.transfer.finetune import RESULT_FILE, FineTuneJob, TaskData, compact, load_model, trained_parameters
from distalign.transfer.hub_fetch import transfer_home
from distalign.transfer.metrics import IGNORE
from distalign.transfer.plot import plot_task, summary_metrics
from distalign.transfer.tasks.base import FineTuneSettings, TransferTask
from distalign.transfer.tasks.registry import TRANSFER_TASKS
from distalign.transfer.transfer_spec import FineTuneOverrides, TransferSpec

PREFIX = "[distalign transfer]"


@dataclass
class PreparedTask:
    task: type[TransferTask]
    targets: tuple[str, ...]
    settings: FineTuneSettings
    data: TaskData
    reports: list[ReadReport]


def task_settings(task: type[TransferTask], overrides: FineTuneOverrides) -> FineTuneSettings:
    given = {k: v for k, v in asdict(overrides).items() if v is not None}
    settings = replace(task.settings, **given)
    return replace(settings, source=f"{settings.source}; overridden: {given}") if given else settings


def target_languages(spec: TransferSpec, name: str) -> tuple[str, ...]:
    langs = spec.targets.get(name) or spec.languages
    if not langs and spec.data_dir and (Path(spec.data_dir) / name).is_dir():
        langs = tuple(
            sorted(
                language_code(p.name, f"{p} (a language folder)")
                for p in (Path(spec.data_dir) / name).iterdir()
                if p.is_dir() and not p.name.startswith(".")
            )
        )  # (data fetch's unfinished saves)
    langs = tuple(lang for lang in langs if lang != spec.source)
    if not langs:
        raise InputError(
            f"{name}: no target languages: give --langs (or targets.{name}), or put "
            f"<data_dir>/{name}/<lang>/ folders beside {spec.source}"
        )
    return langs


def validate(spec: TransferSpec) -> None:
    if not spec.model:
        raise ConfigError("model: name the model to transfer (a directory or hub name)")
    for i, name in enumerate(spec.tasks):
        if name not in TRANSFER_TASKS:
            raise ConfigError(f"tasks[{i}]: {name!r} is not one of {list(TRANSFER_TASKS)}")
    for name in spec.targets:
        if name not in spec.tasks:
            raise ConfigError(f"targets.{name}: not among tasks {list(spec.tasks)}")
    if spec.seeds < 1 or spec.num_workers < 1 or spec.cpus_per_worker <= 0:
        raise ConfigError("seeds, num_workers: must be >= 1; cpus_per_worker: must be > 0")
    if not spec.data_dir and not spec.hub:
        raise ConfigError(
            f"data_dir: give --data-dir, or --hub to load the data sets from the Hugging Face Hub, or "
            f"fetch them into the data home ({transfer_home(data_home())}) with `distalign data fetch "
            f"{spec.tasks[0] if spec.tasks else 'TASK'}:{spec.source},LANG`"
        )
    for i, path in enumerate(spec.compare_to):
        read_summary(path, f"compare_to[{i}]")


def read_summary(path: str, key: str) -> pd.DataFrame:
    """An earlier evaluation's ``summary.csv`` (the file or its folder), checked."""
    file = Path(path) / "summary.csv" if Path(path).is_dir() else Path(path)
    if not file.is_file():
        raise ConfigError(f"{key}: {path}: no summary.csv of an earlier transfer evaluation")
    summary = pd.read_csv(file)
    missing = {"task", "lang", "metric", "mean", "std"} - set(summary.columns)
    if missing:
        raise ConfigError(f"{key}: {file}: not a transfer summary (no columns {sorted(missing)})")
    return summary


def prepare(spec: TransferSpec, model: ModelUnderTest, progress=say) -> list[PreparedTask]:
    """Every task's splits read, checked, cut to the spec's limits and tokenised; errors before any Ray work."""
    from distalign.models.language_embeddings import read_input_languages
    from distalign.models.loading import load_tokenizer, max_model_positions

    if spec.data_dir and not spec.hub and not Path(spec.data_dir).is_dir():  # (validate runs before a world exists)
        raise ConfigError(
            f"data_dir: {spec.data_dir} is not a folder: give --data-dir the folder of "
            "<task>/<lang>/ data sets (save_to_disk folders)"
        )
    table = read_input_languages(model.path)
    tokenizer = load_tokenizer(model.path)
    positions = max_model_positions(model.path)
    prepared = []
    for name in spec.tasks:
        task = TRANSFER_TASKS[name]
        settings = task_settings(task, spec.finetune)
        if settings.max_length > positions:  # a longer example fails inside a Ray worker's embeddings
            progress(
                f"{PREFIX} {name}: max length {settings.max_length} capped at {positions}, the most tokens "
                f"{model.label} takes"
            )
            settings = replace(settings, max_length=positions)
        targets = target_languages(spec, name)
        if settings.batch_size % spec.num_workers:
            raise ConfigError(f"{name}: batch size {settings.batch_size} must divide over {spec.num_workers} workers")
        selection = (spec.source,) if spec.select_on == "source" else targets
        missing = [lang for lang in (spec.source, *targets) if table is not None and lang not in table.languages]
        if missing:  # DICT-MLM §3.1 adds each language's own embedding at fine-tuning and test time
            raise InputError(
                f"{name}: {model.path} has input language embeddings for {list(table.languages)}, none for {missing}"
            )
        wanted = (
            [(spec.source, "train")]
            + [(lang, "validation") for lang in selection]
            + [(lang, "test") for lang in (spec.source, *targets)]
        )
        read, reports = {}, []
        for lang, split in wanted:  # every split read before any is tokenised: a missing one fails fast
            examples, report = read_split(
                task,
                spec.data_dir,
                lang,
                split,
                spec.hub,
                spec.hub_configs,
                spec.tydiqa_train if name == "tydiqa" else "",
            )
            limit = spec.max_train_examples if split == "train" else spec.max_eval_examples
            read[lang, split] = examples[:limit] if limit else examples
            reports.append(report)
            if not examples:
                raise InputError(f"{name}: no usable examples: {report.summary()}")  # the first rows' reasons
        if len(read[spec.source, "train"]) < settings.batch_size:
            raise InputError(
                f"{name}: {len(read[spec.source, 'train'])} training examples, fewer than one batch "
                f"of {settings.batch_size}"
            )
        encoded = {key: task.encode(examples, tokenizer, settings.max_length) for key, examples in read.items()}
        lost = sum(
            f["words"] - sum(label != IGNORE for label in f["labels"])
            for features in encoded.values()
            for f in features
            if "words" in f
        )
        if lost:
            progress(f"{PREFIX} {name}: {lost} words lost their label to truncation at {settings.max_length} tokens")
        encoded = {key: compact(features) for key, features in encoded.items()}
        try:  # on the driver once: the saved adapters and language table must fit the task model before Ray starts
            trained = trained_parameters(load_model(model.path, task, spec.adapter_training))
        except ValueError as error:
            raise InputError(f"{name}: {model.path}: {error}") from error
        progress(f"{PREFIX} {name}: fine-tuning trains {trained}")
        data = TaskData(
            encoded[spec.source, "train"],
            {lang: encoded[lang, "validation"] for lang in selection},
            {lang: encoded[lang, "test"] for lang in (spec.source, *targets)},
        )
        prepared.append(PreparedTask(task, targets, settings, data, reports))
        sizes = ", ".join(f"{lang} {split} {len(v)}" for (lang, split), v in read.items())
        progress(
            f"{PREFIX} {name}: {sizes}; lr {settings.lr}, batch {settings.batch_size}, {settings.epochs} "
            f"epochs, max length {settings.max_length}, dev scored every "
            f"{f'{settings.select_every} steps' if settings.select_every else 'epoch'} ({settings.source})"
        )
    return prepared


def run_fine_tuning(job: FineTuneJob, data_ref: list, pad_id: int, spec: TransferSpec, storage: str) -> dict:
    """One TorchTrainer run (inside a Ray task); returns the worker's result (``finetune.fine_tune``)."""
    import ray.train
    from ray.train.torch import TorchTrainer

    from distalign.transfer.finetune import train_loop_per_worker

    trainer = TorchTrainer(
        train_loop_per_worker,
        train_loop_config={"job": job, "data": data_ref, "pad_id": pad_id},
        scaling_config=ray.train.ScalingConfig(
            num_workers=spec.num_workers, use_gpu=spec.use_gpu, resources_per_worker={"CPU": spec.cpus_per_worker}
        ),
        run_config=ray.train.RunConfig(
            name=f"transfer-{job.task}-seed{job.seed}-{uuid.uuid4().hex[:8]}", storage_path=storage
        ),
    )
    result = trainer.fit()
    with result.checkpoint.as_directory() as directory:
        return json.loads((Path(directory) / RESULT_FILE).read_text())


def run_all(
    spec: TransferSpec, model: ModelUnderTest, prepared: list[PreparedTask], storage: str, progress=say
) -> list[dict]:
    """Every (task, seed) run submitted at once; results in submission order."""
    import ray

    from distalign.models.loading import load_tokenizer

    pad_id = load_tokenizer(model.path).pad_token_id
    launch = ray.remote(run_fine_tuning).options(num_cpus=0, name="distalign-transfer-run")
    pending, order = {}, []
    for p in prepared:
        data_ref = ray.put(p.data)  # once per task, shared by its seeds
        for seed in range(spec.seed, spec.seed + spec.seeds):
            job = FineTuneJob(
                task=p.task.name,
                seed=seed,
                model_path=model.location,
                settings=p.settings,
                source=spec.source,
                adapter_training=spec.adapter_training,
                endpoint_url=model.endpoint_url,
            )
            ref = launch.remote(job, [data_ref], pad_id, spec, storage)  # in a list: Ray passes the ref, not the data
            pending[ref] = f"{p.task.name} seed {seed}"
            order.append(ref)
    progress(f"{PREFIX} {len(pending)} fine-tuning runs submitted, {spec.num_workers} worker(s) each")
    started, results = time.time(), {}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        label = pending.pop(done[0])
        results[done[0]] = result = ray.get(done[0])
        main = TRANSFER_TASKS[result["task"]].main_metric
        scores = ", ".join(f"{lang} {m[main]:.3f}" for lang, m in result["test"].items())
        progress(
            f"{PREFIX} {len(results)}/{len(order)} {label}: step {result['selected_step']} (epoch "
            f"{result['selected_epoch']}) selected; "
            f"test {main}: {scores} ({result['seconds']:.0f} s fine-tuning, {time.time() - started:.0f} s in all)"
        )
    return [results[ref] for ref in order]


def predictions_folder(out_dir: Path, task: str, seed: int) -> Path:
    """Where one fine-tuning run's test predictions are: ``<lang>.jsonl`` files (``write_predictions``)."""
    return out_dir / "predictions" / task / f"seed{seed}"


def write_predictions(result: dict, out_dir: Path) -> None:
    """The test predictions of one fine-tuning run (taken out of ``result``) as
    ``<out_dir>/predictions/<task>/seed<seed>/<lang>.jsonl``, a line per example (``id``, ``gold``, ``predicted``:
    ``TransferTask.prediction_rows``), as XTREME writes its test predictions; ``result["predictions_dir"]`` names the
    folder (logged to the run's MLflow child run)."""
    folder = predictions_folder(out_dir, result["task"], result["seed"])
    folder.mkdir(parents=True, exist_ok=True)
    for lang, rows in result.pop("predictions").items():
        (folder / f"{lang}.jsonl").write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
        )
    result["predictions_dir"] = str(folder)


def _log_metrics(client, run_id: str, values: list[tuple[str, float, int]]) -> None:
    """(name, value, step) triples in batches of MLflow's limit (1,000 a request)."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    metrics = [Metric(name, float(value), now, step) for name, value, step in values]
    for start in range(0, len(metrics), 1000):
        client.log_batch(run_id, metrics=metrics[start : start + 1000])


def log_to_mlflow(
    spec: TransferSpec,
    model: ModelUnderTest,
    prepared: list[PreparedTask],
    results: list[dict],
    per_seed: pd.DataFrame,
    summary: pd.DataFrame,
    files: list[Path],
    into: tuple[str, int] | None = None,
    evaluates: tuple[str, int] | None = None,
) -> str:
    """A parent run (means and stds over seeds, the summary table) with a child run per fine-tuning (its dev scores
    by step, its test scores); metric names ``transfer/<task>/<lang>/<metric>``. With ``into`` (run id, step) the
    parent is that existing run (the training run's own transfer after training: the values at the checkpoint's
    step, the files under ``transfer/step_<step>/``; its params and status untouched). With ``evaluates`` (a later
    evaluation of a checkpoint: its training run's id and its step) the parent is a new child run of that training
    run, which stays as training left it."""
    from distalign.tracking import CHECKPOINT_TAG, PARENT_TAG, client_for, experiment_id, log_params

    uri = resolve_tracking_uri(spec.tracking.uri)
    client = client_for(uri)
    step, artifact_dir = 0, None
    if into:
        parent, step = into
        exp_id, artifact_dir = client.get_run(parent).info.experiment_id, f"transfer/step_{step}"
    else:
        tags = {}
        if evaluates:
            training, step = evaluates
            exp_id = client.get_run(training).info.experiment_id
            tags = {
                PARENT_TAG: training,
                EVALUATED_RUN_TAG: training,
                EVALUATED_STEP_TAG: str(step),
                CHECKPOINT_TAG: model.checkpoint or model.location,
            }
        else:
            exp_id = experiment_id(client, spec.tracking.experiment)
        parent = client.create_run(exp_id, run_name=f"transfer-{model.label}", tags=tags).info.run_id
        params = {
            "model": model.location,
            "tasks": ",".join(spec.tasks),
            "source": spec.source,
            "select_on": spec.select_on,
            "seeds": spec.seeds,
            "num_workers": spec.num_workers,
            "adapter_training": spec.adapter_training,
        }
        for p in prepared:
            params |= {
                f"{p.task.name}.targets": ",".join(p.targets),
                **{f"{p.task.name}.{k}": v for k, v in asdict(p.settings).items()},
            }
        log_params(client, parent, params)
    for result in results:
        name = result["task"]
        child = client.create_run(
            exp_id,
            run_name=f"transfer-{model.label}-{name}-seed{result['seed']}",
            tags={PARENT_TAG: parent, "distalign.selected_step": str(result["selected_step"])},
        )
        child_id = child.info.run_id
        log_params(
            client,
            child_id,
            {
                "task": name,
                "seed": result["seed"],
                "model": model.location,
                "select_on": spec.select_on,
                "trained": result["trained"],
                **result["settings"],
            },
        )
        values = []
        for candidate in result["history"]:  # at the candidate's optimizer step
            at = candidate["step"]
            values += [
                (f"transfer/{name}/dev/selection", candidate["selection"], at),
                (f"transfer/{name}/train_loss", candidate["train_loss"], at),
            ]
            values += [
                (f"transfer/{name}/dev/{lang}/{metric}", value, at)
                for lang, metrics in candidate["dev"].items()
                for metric, value in metrics.items()
            ]
        rows = per_seed[(per_seed["task"] == name) & (per_seed["seed"] == result["seed"])]
        values += [(f"transfer/{name}/{row.lang}/{row.metric}", row.value, 0) for row in rows.itertuples()]
        _log_metrics(client, child_id, values)
        client.log_artifacts(child_id, result["predictions_dir"], "predictions")
        client.set_terminated(child_id)
    _log_metrics(client, parent, [(name, value, step) for name, value in summary_metrics(summary).items()])
    table = f"{artifact_dir}/transfer_summary.json" if artifact_dir else "transfer_summary.json"
    client.log_table(parent, data=summary, artifact_file=table)
    for path in files:
        client.log_artifact(parent, str(path), artifact_dir)
    if not into:
        client.set_terminated(parent)
    where = (
        ""
        if into
        else f", a child run of {evaluates[0]}"
        if evaluates
        else f", experiment {spec.tracking.experiment!r}"
    )
    say(
        f"{PREFIX} MLflow run {parent} ({uri}{where}): {len(results)} child runs, {2 * len(summary)} metrics"
        + (f" at step {step}" if into or evaluates else "")
    )
    return parent


def run_transfer(
    spec: TransferSpec,
    progress=say,
    references: dict[str, pd.DataFrame] | None = None,
    into: tuple[str, int] | None = None,
    evaluates: tuple[str, int] | None = None,
    endpoint_url: str | None = None,
) -> tuple[pd.DataFrame, str]:
    """The whole evaluation as ``spec`` says: returns the summary table and the MLflow run id ("" without).

    ``references``: label -> summary of other models (besides ``spec.compare_to``), bars beside this model's in
    the plots; ``into``: log into this (run id, step) instead of a new run; ``evaluates``: a checkpoint's (training
    run id, step), the new run a child of that run (``log_to_mlflow``); ``endpoint_url``: the storage endpoint of a
    model in storage (default $DISTALIGN_STORAGE_ENDPOINT)."""
    from distalign.ray_session import ensure_ray
    from distalign.tracking import check_reachable

    validate(spec)
    if spec.tracking.enabled:  # a dead server would stall MLflow for minutes after the fine-tuning
        check_reachable(resolve_tracking_uri(spec.tracking.uri))
    model = resolve_model(None, spec.model, endpoint_url)
    prepared = prepare(spec, model, progress)
    for p in prepared:
        for report in p.reports:
            if report.malformed:
                progress(f"{PREFIX} WARNING {report.summary()}")
    out_dir = Path(
        spec.output_dir
        or distalign_home() / "transfer_results" / f"{model.label.replace('/', '_')}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    progress(
        f"{PREFIX} model selection on the {spec.select_on} language's dev set"
        f"{'' if spec.select_on == 'source' else 's'}; results in {out_dir}"
    )
    ensure_ray()
    results = run_all(spec, model, prepared, spec.storage_path or str(out_dir / "ray"), progress)
    for result in results:
        write_predictions(result, out_dir)
    main = {p.task.name: p.task.main_metric for p in prepared}
    per_seed = pd.DataFrame([row for r in results for row in protocol.seed_rows(r, spec.source, main[r["task"]])])
    summary = protocol.summarise(per_seed)
    files = [out_dir / "summary.csv", out_dir / "per_seed.csv", out_dir / "runs.json"]
    summary.to_csv(files[0], index=False)
    per_seed.to_csv(files[1], index=False)
    files[2].write_text(json.dumps({"select_on": spec.select_on, "runs": results}, indent=1))
    compared = {
        Path(path).parent.name if path.endswith(".csv") else Path(path).name: read_summary(path, path)
        for path in spec.compare_to
    } | (references or {})  # label: the folder (of the summary.csv)
    bars = compared | {model.label: summary}
    files += [
        plot_task(bars, name, metric, spec.source, out_dir / f"transfer_{name}.png") for name, metric in main.items()
    ]
    progress(
        f"\n{PREFIX} zero-shot transfer from {spec.source}, weights selected on {spec.select_on} dev:\n"
        + protocol.text_table(summary, main, spec.source)
        + "\n"
    )
    run_id = (
        log_to_mlflow(spec, model, prepared, results, per_seed, summary, files, into, evaluates)
        if spec.tracking.enabled
        else ""
    )
    return summary, run_id


def spec_from_args(args, model: str | None = None, tasks: list[str] | None = None) -> TransferSpec:
    """The ``--spec`` file, then the flags given, then the dotted ``key=value`` overrides; paths made absolute.

    ``distalign eval`` passes its ``--checkpoint``/``--model`` and its transfer tasks as ``model`` and ``tasks`` (its
    own ``--spec`` and overrides are an evaluation spec's, not read here)."""
    for_eval = tasks is not None
    values = {
        "model": model if for_eval else args.model,
        "tasks": tasks if for_eval else None if args.tasks is None else comma_list(args.tasks),
        "data_dir": args.data_dir,
        "hub": args.hub,
        "source": args.source,
        "tydiqa_train": args.tydiqa_train,
        "languages": None if args.langs is None else comma_list(args.langs),
        "select_on": args.select_on,
        "seeds": args.seeds,
        "finetune.lr": args.lr,
        "finetune.batch_size": args.batch_size,
        "finetune.epochs": args.epochs,
        "finetune.max_length": args.max_length,
        "finetune.select_every": args.select_every,
        "max_train_examples": args.max_train_examples,
        "max_eval_examples": args.max_eval_examples,
        "num_workers": args.workers,
        "cpus_per_worker": args.cpus_per_worker,
        "use_gpu": args.use_gpu,
        "output_dir": args.output_dir,
        "compare_to": args.compare_to,
        "tracking.uri": args.tracking_uri,
        "tracking.experiment": args.experiment,
        "tracking.enabled": False if args.no_mlflow else None,
    }
    overrides = [f"{k}={json.dumps(v)}" for k, v in values.items() if v is not None]
    for item in args.hub_config or []:
        key, _, config = item.partition("=")
        overrides.append(f"hub_configs.{key}={json.dumps(config)}")
    spec_file = None if for_eval else args.spec
    spec: TransferSpec = load_dataclass(TransferSpec, spec_file, overrides + ([] if for_eval else args.overrides))
    base = Path(spec_file).parent if spec_file else Path.cwd()
    spec.data_dir = resolve_path(spec.data_dir, base)
    if not spec.data_dir and not spec.hub and transfer_home(data_home()).is_dir():  # what `data fetch xnli:de` saved
        spec.data_dir = str(transfer_home(data_home()))
    spec.compare_to = tuple(resolve_path(path, base) for path in spec.compare_to)
    if Path(spec.model).expanduser().exists() or spec.model.startswith((".", "/", "~")):
        spec.model = resolve_path(spec.model, base)
    return spec


def run_transfer_cli(args) -> int:
    run_transfer(spec_from_args(args))
    return 0


def checkpoint_run(spec: TransferSpec, model: ModelUnderTest) -> tuple[str, int] | None:
    """(run id, step) of a checkpoint's training run when the MLflow store knows it: ``distalign eval``'s runs are
    child runs of it."""
    from distalign.tracking import client_for

    if not (spec.tracking.enabled and model.mlflow_run_id):
        return None
    uri = resolve_tracking_uri(spec.tracking.uri)
    try:
        client_for(uri).get_run(model.mlflow_run_id)
    except Exception:  # the checkpoint was trained against another MLflow store
        say(f"{PREFIX} run {model.mlflow_run_id} of the checkpoint is not in {uri}: logging to a new run")
        return None
    return model.mlflow_run_id, model.step
