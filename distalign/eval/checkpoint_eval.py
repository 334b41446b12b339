"""``distalign eval``: benchmarks on a checkpoint or model, fanned out over Ray, reported to MLflow.

    distalign data fetch g-bli bli-vocab multisimlex tatoeba
    distalign eval --checkpoint runs/quickstart/checkpoint_... \\
        --tasks bli,xlsim,tatoeba --bli-pairs de-en,en-fi --xlsim-pairs eng-fra --tatoeba-langs deu,fra
    distalign eval --spec my_eval.yaml suite.max_queries=100 --model xlm-roberta-base

What to run is an ``EvalSpec``: a ``--spec`` YAML file, then the flags given, then dotted
``key=value`` overrides, read and checked by the loader of training configs
(``distalign.config.load_dataclass``).

Results go to ``<output-dir>``: ``results.csv``/``.parquet`` (task x pair x layer x metric),
``best_layers.csv``, ``by_layer.png`` and one pair heatmap per task, and to MLflow: every evaluation is a run of
its own. A checkpoint whose training run the store knows gets a child run of it (nested under it in the UI, values
at the checkpoint's step); the training run's own metrics and artifacts are never written to.

A checkpoint's ``--dictionary`` test sets are built as its run's in-loop BLI built them (the sample of source
words, the target candidates, the casing, the layer and the word budget, from the ``config.yaml`` the checkpoint
keeps): the same dictionary gives the in-loop number.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path

import pandas as pd

from distalign.checkpoint import CONFIG_FILE, MODEL_DIR, STATE_FILE, read_config_mapping, read_state
from distalign.config import (
    ConfigError,
    EvalConfig,
    ModelConfig,
    TrainConfig,
    distalign_home,
    from_dict,
    load_dataclass,
    resolve_path,
    resolve_tracking_uri,
)
from distalign.errors import InputError
from distalign.eval import result_tables
from distalign.eval.eval_arguments import task_flags
from distalign.eval.eval_spec import EvalSpec
from distalign.eval.local_evaluation import EncodingSettings
from distalign.eval.selection import encoding_settings, in_loop_settings
from distalign.eval.suite import build_tasks
from distalign.eval.tasks import EvalTask
from distalign.eval.tasks.base import comma_list
from distalign.eval.tasks.bli import BLISettings
from distalign.eval.tasks.registry import EVAL_TASKS
from distalign.logs import say
from distalign.model_store.locate import locate_model
from distalign.models.loading import check_local_model, check_model_files

ARTIFACT_DIR = "eval"
EVALUATED_RUN_TAG = "distalign.evaluated_run"  # an evaluation run: the training run of its checkpoint
EVALUATED_STEP_TAG = "distalign.evaluated_step"  # ... and the checkpoint's step


@dataclass
class ModelUnderTest:
    path: str  # HF model directory or hub name, as this process reads it (a stored model: this node's copy)
    label: str
    mlflow_run_id: str = ""  # the training run of a checkpoint
    step: int = 0
    checkpoint: str = ""  # the checkpoint directory
    uri: str = ""  # a model in storage (s3://...): its URI, which each node stages once (storage.node_local)
    endpoint_url: str = ""  # ... and the endpoint it is read through

    @property
    def location(self) -> str:
        """Where a Ray task on any node reads the model, through ``node_local``: a stored model's URI (each node
        stages its own copy: the driver's is on the driver's disk only), else ``path``."""
        return self.uri or self.path


def run_bli_settings(checkpoint: Path) -> BLISettings:
    """The in-loop BLI settings of the run a checkpoint was saved by (the ``eval``, ``model`` and ``train`` sections of
    its ``config.yaml``); a checkpoint saved before checkpoints kept their config gets the defaults', with a
    warning."""
    mapping = read_config_mapping(checkpoint)
    if mapping is None:
        say(
            f"[distalign eval] WARNING {checkpoint} keeps no {CONFIG_FILE} (saved by an older distalign): its "
            f"--dictionary test sets use the default config's in-loop BLI settings"
        )
        mapping = {}
    try:
        evaluation, model, train = (
            from_dict(section, mapping.get(name) or {}, name)
            for name, section in (("eval", EvalConfig), ("model", ModelConfig), ("train", TrainConfig))
        )
        return in_loop_settings(evaluation, model, seed=train.seed)
    except ConfigError as err:
        raise InputError(f"--checkpoint {checkpoint}: its {CONFIG_FILE} does not read as a config: {err}") from err


def resolve_model(checkpoint: str | None, model: str | None, endpoint_url: str | None = None) -> ModelUnderTest:
    """A checkpoint directory (its ``model/`` and ``trainer_state.json``), a model directory, a hub name, or a model
    in storage read through ``endpoint_url`` (default $DISTALIGN_STORAGE_ENDPOINT)."""
    if checkpoint:
        path = Path(checkpoint).expanduser().resolve()
        if not (path / MODEL_DIR / "config.json").is_file():
            raise InputError(f"--checkpoint {checkpoint}: not a distalign checkpoint (no {MODEL_DIR}/config.json)")
        check_model_files(str(path / MODEL_DIR), f"--checkpoint {checkpoint}")
        state = read_state(path) if (path / STATE_FILE).is_file() else None
        return ModelUnderTest(
            str(path / MODEL_DIR),
            f"{path.parent.name}/{path.name}",
            state.mlflow_run_id if state else "",
            state.step if state else 0,
            str(path),
        )
    path = Path(model).expanduser()
    if (path / MODEL_DIR / "config.json").is_file():
        return resolve_model(str(path), None)
    if path.exists():
        check_local_model(model, "--model")
        return ModelUnderTest(str(path.resolve()), path.name)
    if model.startswith((".", "/", "~")):
        raise InputError(f"--model {model}: directory not found")
    # a hub name (in the cache, or the Hub reachable: one look, before any work), or storage staged on this node for
    # the checks here (the Ray tasks stage theirs on their nodes: ``location``)
    endpoint = os.environ.get("DISTALIGN_STORAGE_ENDPOINT", "") if endpoint_url is None else endpoint_url
    local = locate_model(model, "--model", endpoint)
    if "://" in model:
        return ModelUnderTest(local, model.rstrip("/").rsplit("/", 1)[-1], uri=model, endpoint_url=endpoint)
    return ModelUnderTest(local, model)


def _attribute(flag_name: str) -> str:
    return flag_name.lstrip("-").replace("-", "_")


def flag_overrides(args) -> list[str]:
    """The flags given on the command line as ``key=value`` overrides of the spec (JSON values are YAML)."""
    values = {
        "suite.eval_dir": args.eval_dir,
        "suite.tasks": None if args.tasks is None else comma_list(args.tasks),
        "layer": args.layer,
        "output_dir": args.output_dir,
        "cache_dir": args.cache_dir,
        "cpus_per_task": args.cpus_per_task,
        "use_gpu": args.use_gpu,
        "tracking.uri": args.tracking_uri,
        "tracking.experiment": args.experiment,
        "tracking.enabled": False if args.no_mlflow else None,
    }
    for flag in task_flags():
        given = getattr(args, _attribute(flag.name))
        if given is not None:
            values[flag.key] = flag.parse(given) if flag.parse else given
    if args.dictionary and not args.spec:  # own test dictionaries alone: no benchmark of the default suite is asked for
        values.setdefault("suite.bli_pairs", [])
        if args.tasks is None:
            values["suite.tasks"] = ["bli"]
    if args.checkpoint or args.model:  # a model on the command line replaces the spec's
        values |= {"checkpoint": args.checkpoint or "", "model": args.model or ""}
    return [f"{key}={json.dumps(value)}" for key, value in values.items() if value is not None]


def spec_from_args(args) -> EvalSpec:
    """The evaluation spec: the ``--spec`` file, then the flags given, then the ``key=value`` overrides.

    Local input paths become absolute (relative to the working directory, else to the spec file).
    """
    spec: EvalSpec = load_dataclass(EvalSpec, args.spec, flag_overrides(args) + args.overrides)
    if bool(spec.checkpoint) == bool(spec.model):
        raise ConfigError("checkpoint, model: give exactly one (--checkpoint or --model)")
    for i, name in enumerate(spec.suite.tasks):
        if name not in EVAL_TASKS:
            raise ConfigError(f"suite.tasks[{i}]: {name!r} is not one of {list(EVAL_TASKS)}")
        EVAL_TASKS[name].validate(spec.suite)
    if spec.cpus_per_task <= 0:
        raise ConfigError("cpus_per_task: must be > 0")
    base = Path(args.spec).parent if args.spec else Path.cwd()
    suite = spec.suite
    suite.eval_dir = resolve_path(suite.eval_dir, base)
    suite.dictionaries = tuple((l1, l2, resolve_path(path, base)) for l1, l2, path in suite.dictionaries)
    spec.checkpoint = resolve_path(spec.checkpoint, base)
    return spec


def summarise(df: pd.DataFrame) -> str:
    """Best layer and its value per task x pair x metric (oov left out), as printed text."""
    best = result_tables.best_layers(result_tables.averages(df))
    best = best[~best["metric"].isin(result_tables.LOWER_IS_BETTER)]
    return best.to_string(index=False, float_format=lambda v: f"{v:.4f}")


def write_reports(df: pd.DataFrame, tasks: list[EvalTask], out_dir: Path) -> list[Path]:
    """Tables and plots in ``out_dir``, then each task's own report; returns the files written."""
    df = result_tables.averages(df)
    files = list(result_tables.write_table(df, out_dir / "results.csv"))
    best = out_dir / "best_layers.csv"
    result_tables.best_layers(df).to_csv(best, index=False)
    files += [best, result_tables.plot_by_layer(df, out_dir / "by_layer.png")]
    plugins = {task.task: type(task) for task in tasks}  # "bli" and "bli_csls" are both BLITask's
    for name in sorted(set(df["task"]) & set(plugins)):
        files += plugins[name].report(df, name, out_dir)
    return files


def log_to_mlflow(df: pd.DataFrame, files: list[Path], model: ModelUnderTest, spec: EvalSpec) -> str:
    """A new MLflow run for this evaluation; returns its id. A checkpoint whose training run is in the store gets a
    child run of it, in its experiment (the UI lists it under the run; each evaluation is a row of its own, so two
    never overwrite each other, and the training run's metrics and artifacts stay as training left them), tagged
    with the run, the checkpoint and its step, the values at that step. Anything else: a run in
    ``tracking.experiment``."""
    from distalign.tracking import CHECKPOINT_TAG, PARENT_TAG, MetricLogger, client_for, experiment_id, log_params

    uri = resolve_tracking_uri(spec.tracking.uri)
    client = client_for(uri)
    training_run, exp_id = model.mlflow_run_id, None
    if training_run:
        try:
            exp_id = client.get_run(training_run).info.experiment_id
        except Exception:  # the checkpoint was trained against another MLflow store
            say(
                f"[distalign eval] run {training_run} of the checkpoint is not in {uri}: logging to a run in "
                f"experiment {spec.tracking.experiment!r}"
            )
    tags = {CHECKPOINT_TAG: model.checkpoint or model.location}
    if model.checkpoint:
        tags[EVALUATED_STEP_TAG] = str(model.step)
    if exp_id is None:
        exp_id = experiment_id(client, spec.tracking.experiment)
    else:
        tags |= {PARENT_TAG: training_run, EVALUATED_RUN_TAG: training_run}
    run_id = client.create_run(exp_id, run_name=f"eval-{model.label}", tags=tags).info.run_id
    settings = {f"suite.{f.name}": getattr(spec.suite, f.name) for f in fields(spec.suite) if f.init}
    if spec.suite.run_settings is not None:
        settings["suite.dictionary_settings"] = str(spec.suite.run_settings)
    log_params(
        client,
        run_id,
        {
            "model": model.location,
            "layer": "best" if spec.layer is None else spec.layer,
            **{
                key: ",".join(map(str, value)) if isinstance(value, tuple) else value for key, value in settings.items()
            },
        },
    )
    metrics = result_tables.mlflow_metrics(df, spec.layer)
    metric_logger = MetricLogger(uri, run_id)
    metric_logger.log(metrics, model.step)
    metric_logger.close()
    for path in files:
        client.log_artifact(run_id, str(path), ARTIFACT_DIR)
    client.set_terminated(run_id)
    where = (
        f"a child run of the checkpoint's training run {training_run}"
        if PARENT_TAG in tags
        else f"experiment {spec.tracking.experiment!r}"
    )
    say(
        f"[distalign eval] {len(metrics)} metrics and {len(files)} files logged to MLflow run {run_id} ({uri}, "
        f"{where}), artifacts under {ARTIFACT_DIR}/"
    )
    return run_id


def report_input_languages(model_path: str, tasks: list[EvalTask]) -> None:
    """Say that a model's input language table (DICT-MLM's) is used, and which languages it has no row for."""
    from distalign.models.language_embeddings import read_input_languages

    table = read_input_languages(model_path) if Path(model_path).is_dir() else None
    if table is None:
        return
    langs = sorted({text_set.lang for task in tasks for text_set in task.text_sets().values()})
    missing = [lang for lang in langs if lang not in table.languages]
    say(
        f"[distalign eval] the model's input language table ({', '.join(table.languages)}): each text set's "
        "language's row is added to the word embeddings (DICT-MLM §3.1)"
    )
    if missing:
        say(f"[distalign eval] WARNING no language embedding for {', '.join(missing)}: encoded without one")


def report_casing(model_path: str, tasks: list[EvalTask]) -> None:
    """Say when the BLI test dictionaries are lower case and the model cased (``casing_note``)."""
    from distalign.data.dictionary_checks import casing_note
    from distalign.eval.tasks.bli import BLITask

    words = [(task.lang1, task.lang2, task.queries + task.vocab) for task in tasks if isinstance(task, BLITask)]
    if words and (note := casing_note(model_path, words)):
        say(f"[distalign eval] NOTE {note}")


@dataclass
class PreparedEval:
    """An evaluation checked and read, ready for Ray: its spec, model, tasks and the model's layer count."""

    spec: EvalSpec
    model: ModelUnderTest
    tasks: list[EvalTask]
    num_layers: int
    encoding: EncodingSettings = EncodingSettings()


def run_eval_cli(args) -> int:
    return run_prepared(prepare_eval(args))


def prepare_eval(args) -> PreparedEval:
    """The spec of ``args``, the model resolved and every benchmark file read and checked: all that can fail on the
    user's input, before any Ray work (``distalign eval`` with transfer tasks calls this before the transfer runs)."""
    from transformers import AutoConfig

    from distalign.tracking import check_reachable

    spec = spec_from_args(args)
    if spec.tracking.enabled:  # the results are logged after all the Ray work: a dead server must show first
        check_reachable(resolve_tracking_uri(spec.tracking.uri))
    suite = spec.suite
    model = resolve_model(spec.checkpoint, spec.model)
    encoding = EncodingSettings()
    if model.checkpoint:  # its dictionaries' test sets and its word budget as its run's in-loop BLI
        run_bli = run_bli_settings(Path(model.checkpoint))
        suite.run_settings = replace(run_bli, layer=run_bli.layer if spec.layer is None else spec.layer)
        if suite.dictionary_vocab_dir:
            suite.run_settings = replace(
                suite.run_settings, vocab_dir=suite.dictionary_vocab_dir, vocab_size=suite.vocab_size
            )
        encoding = encoding_settings(suite.run_settings)
        if suite.dictionaries:
            say(
                f"[distalign eval] --dictionary test sets built as the checkpoint's run built its in-loop BLI: "
                f"{suite.run_settings}"
            )
    tasks = build_tasks(suite)  # every file read and checked before Ray starts
    for read in {read.path: read for read in suite.reports}.values():  # bli and word_alignment read the same files
        if read.malformed:
            say(f"[distalign eval] WARNING {read.summary()}")
    report_input_languages(model.path, tasks)
    report_casing(model.path, tasks)
    num_layers = AutoConfig.from_pretrained(model.path).num_hidden_layers + 1
    for task in tasks:
        task.check_model(num_layers)
    return PreparedEval(spec, model, tasks, num_layers, encoding)


def run_prepared(prepared: PreparedEval) -> int:
    """Encode and score on Ray, write the tables and plots, log to MLflow."""
    from distalign.eval.distributed import Resources, evaluate_distributed
    from distalign.ray_session import ensure_ray

    spec, model, tasks, num_layers = prepared.spec, prepared.model, prepared.tasks, prepared.num_layers
    out_dir = Path(
        spec.output_dir
        or distalign_home() / "eval_results" / f"{model.label.replace('/', '_')}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    cache_dir = spec.cache_dir or str(distalign_home() / ".cache" / "encodings")
    say(f"[distalign eval] {model.path}: {len(tasks)} tasks, {num_layers} layers; results in {out_dir}")

    ensure_ray()
    rows = evaluate_distributed(
        model.location,
        tasks,
        num_layers,
        None if spec.layer is None else [spec.layer],
        prepared.encoding,
        cache_dir,
        Resources(spec.cpus_per_task, spec.cpus_per_task, spec.use_gpu),
        endpoint_url=model.endpoint_url,
    )
    df = pd.DataFrame(rows).sort_values(["task", "pair", "layer", "metric"]).reset_index(drop=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = write_reports(df, tasks, out_dir)
    say("\n[distalign eval] best layer per task and pair:\n" + summarise(df) + "\n")
    if spec.tracking.enabled:
        log_to_mlflow(df, files, model, spec)
    return 0
