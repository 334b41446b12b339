"""``distalign eval``: benchmarks on a checkpoint or model, fanned out over Ray, reported to MLflow.

    distalign eval --checkpoint runs/quickstart/checkpoint_... --eval-dir ../shared/data/eval \\
        --tasks bli,xlsim,tatoeba --bli-pairs de-en,en-fi --xlsim-pairs eng-fra --tatoeba-langs deu,fra

Results go to ``<output-dir>``: ``results.csv``/``.parquet`` (task x pair x layer x metric),
``best_layers.csv``, ``by_layer.png`` and one pair heatmap per task, and to MLflow: the checkpoint's
own training run when the store knows it (values at the checkpoint's step), otherwise a new run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from distalign.config import distalign_home
from distalign.data.readers import InputError
from distalign.eval import report
from distalign.eval.suite import SuiteSpec, build_tasks, split_pair
from distalign.eval.tasks import EncodingSettings
from distalign.train.checkpoint import MODEL_DIR, STATE_FILE, read_state

ARTIFACT_DIR = "eval"


@dataclass
class ModelUnderTest:
    path: str  # HF model directory or hub name
    label: str
    mlflow_run_id: str = ""  # the training run of a checkpoint
    step: int = 0


def resolve_model(checkpoint: str | None, model: str | None) -> ModelUnderTest:
    """A checkpoint directory (its ``model/`` and ``trainer_state.json``), a model directory or a hub name."""
    if checkpoint:
        path = Path(checkpoint).expanduser().resolve()
        if not (path / MODEL_DIR / "config.json").is_file():
            raise InputError(f"--checkpoint {checkpoint}: not a distalign checkpoint (no {MODEL_DIR}/config.json)")
        state = read_state(path) if (path / STATE_FILE).is_file() else None
        return ModelUnderTest(str(path / MODEL_DIR), f"{path.parent.name}/{path.name}",
                              state.mlflow_run_id if state else "", state.step if state else 0)
    path = Path(model).expanduser()
    if (path / MODEL_DIR / "config.json").is_file():
        return resolve_model(str(path), None)
    if path.exists():
        return ModelUnderTest(str(path.resolve()), path.name)
    if model.startswith((".", "/", "~")):
        raise InputError(f"--model {model}: directory not found")
    return ModelUnderTest(model, model)  # a hub name, loaded by transformers


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def suite_from_args(args) -> SuiteSpec:
    dictionaries = []
    for spec in args.dictionary or []:
        pair, sep, path = spec.partition(":")
        if not sep:
            raise InputError(f"--dictionary {spec!r}: expected L1-L2:PATH, e.g. de-en:test.tsv")
        dictionaries.append((*split_pair(pair, "--dictionary"), path))
    return SuiteSpec(args.eval_dir, _csv(args.tasks), _csv(args.bli_pairs), _csv(args.xlsim_pairs),
                     _csv(args.tatoeba_langs), tuple(dictionaries), _csv(args.similarity), args.vocab_size,
                     args.max_queries, args.max_sentences)


def summarise(df: pd.DataFrame) -> str:
    """Best layer and its value per task x pair x metric (oov left out), as printed text."""
    best = report.best_layers(report.averages(df))
    best = best[~best["metric"].isin(report.LOWER_IS_BETTER)]
    return best.to_string(index=False, float_format=lambda v: f"{v:.4f}")


def write_reports(df: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Tables and plots in ``out_dir``; returns the files written."""
    df = report.averages(df)
    files = list(report.write_table(df, out_dir / "results.csv"))
    best = out_dir / "best_layers.csv"
    report.best_layers(df).to_csv(best, index=False)
    files += [best, report.plot_by_layer(df, out_dir / "by_layer.png")]
    main_metric = {"bli": "mrr", "xlsim": "spearman", "tatoeba": "acc", "alignment": "score"}
    pairs_only = df[df["pair"] != report.AVG]
    for task in sorted(pairs_only["task"].unique()):
        metric = main_metric.get(task.split("_")[0], "mrr")
        best_layer = report.best_layers(df[(df["task"] == task) & (df["pair"] == report.AVG)])
        best_layer = best_layer[best_layer["metric"] == metric]
        if not best_layer.empty:
            files.append(report.plot_pair_heatmap(df, task, metric, int(best_layer["layer"].iloc[0]),
                                                  out_dir / f"heatmap_{task}.png"))
    return files


def log_to_mlflow(df: pd.DataFrame, files: list[Path], model: ModelUnderTest, args) -> str:
    from distalign.tracking import CHECKPOINT_TAG, MetricLogger, client_for, experiment_id, log_params

    uri = args.tracking_uri or f"sqlite:///{distalign_home() / 'mlflow.db'}"
    client = client_for(uri)
    run_id = model.mlflow_run_id
    known = False
    if run_id:
        try:
            client.get_run(run_id)
            known = True
        except Exception:  # the checkpoint was trained against another MLflow store
            print(f"[distalign eval] run {run_id} of the checkpoint is not in {uri}: logging to a new run")
    metrics = report.mlflow_metrics(df, None if args.layer is None else args.layer)
    if known:
        artifact_path = f"{ARTIFACT_DIR}/step_{model.step}"
    else:
        exp_id = experiment_id(client, args.experiment)
        run_id = client.create_run(exp_id, run_name=f"eval-{model.label}",
                                   tags={CHECKPOINT_TAG: model.path}).info.run_id
        log_params(client, run_id, {"model": model.path, "tasks": args.tasks, "eval_dir": args.eval_dir,
                                    "vocab_size": args.vocab_size, "similarity": args.similarity,
                                    "layer": "best" if args.layer is None else args.layer})
        artifact_path = ARTIFACT_DIR
    MetricLogger(uri, run_id).log(metrics, model.step)
    for path in files:
        client.log_artifact(run_id, str(path), artifact_path)
    if not known:
        client.set_terminated(run_id)
    print(f"[distalign eval] {len(metrics)} metrics and {len(files)} files logged to MLflow run {run_id} "
          f"({uri}), artifacts under {artifact_path}/")
    return run_id


def run_eval_cli(args) -> int:
    from transformers import AutoConfig

    from distalign.eval.distributed import Resources, evaluate_distributed
    from distalign.ray_session import ensure_ray

    spec = suite_from_args(args)
    model = resolve_model(args.checkpoint, args.model)
    tasks = build_tasks(spec)  # every file read and checked before Ray starts
    for read in spec.reports:
        if read.malformed:
            print(f"[distalign eval] WARNING {read.summary()}")
    num_layers = AutoConfig.from_pretrained(model.path).num_hidden_layers + 1
    out_dir = Path(args.output_dir or distalign_home() / "eval_results" /
                   f"{model.label.replace('/', '_')}-{time.strftime('%Y%m%d-%H%M%S')}")
    cache_dir = args.cache_dir or str(distalign_home() / ".cache" / "encodings")
    print(f"[distalign eval] {model.path}: {len(tasks)} tasks, {num_layers} layers; results in {out_dir}")

    ensure_ray()
    rows = evaluate_distributed(model.path, tasks, num_layers, None if args.layer is None else [args.layer],
                                EncodingSettings(), cache_dir, Resources(args.cpus_per_task, args.cpus_per_task,
                                                                         args.use_gpu))
    df = pd.DataFrame(rows).sort_values(["task", "pair", "layer", "metric"]).reset_index(drop=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = write_reports(df, out_dir)
    print("\n[distalign eval] best layer per task and pair:\n" + summarise(df) + "\n")
    if not args.no_mlflow:
        log_to_mlflow(df, files, model, args)
    return 0


def add_eval_arguments(parser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", help="distalign checkpoint directory (logs into its training run)")
    source.add_argument("--model", help="Hugging Face model directory or hub name (e.g. xlm-roberta-base)")
    parser.add_argument("--eval-dir", default="../shared/data/eval", help="benchmark folder (default %(default)s)")
    parser.add_argument("--tasks", default="bli,xlsim,tatoeba", help="comma list of bli,xlsim,tatoeba,alignment")
    parser.add_argument("--bli-pairs", default="de-en,en-fi", help="G-BLI pairs for bli and alignment")
    parser.add_argument("--xlsim-pairs", default="eng-fra", help="Multi-SimLex pairs (ISO 639-3)")
    parser.add_argument("--tatoeba-langs", default="deu,fra", help="Tatoeba languages (ISO 639-3), each vs English")
    parser.add_argument("--dictionary", action="append", metavar="L1-L2:PATH",
                        help="extra BLI test dictionary (G-BLI/MUSE/PanLex format), repeatable")
    parser.add_argument("--similarity", default="cosine", help="BLI ranking: cosine, csls or cosine,csls")
    parser.add_argument("--vocab-size", type=int, default=100_000, help="BLI target vocabulary size")
    parser.add_argument("--max-queries", type=int, default=0, help="BLI source words per pair (0 = all)")
    parser.add_argument("--max-sentences", type=int, default=0, help="Tatoeba sentences per language (0 = all)")
    parser.add_argument("--layer", type=int, default=None,
                        help="score only this layer (negative counts from the last); default: all layers, "
                             "MLflow values at each task's best layer")
    parser.add_argument("--output-dir", default="", help="where tables and plots go")
    parser.add_argument("--cache-dir", default="", help="encoding cache (default $DISTALIGN_HOME/.cache/encodings)")
    parser.add_argument("--cpus-per-task", type=float, default=1.0, help="CPUs per Ray encoding/scoring task")
    parser.add_argument("--use-gpu", action="store_true", help="encode on a GPU per encoding task")
    parser.add_argument("--tracking-uri", default="", help="MLflow store (default sqlite:///$DISTALIGN_HOME/mlflow.db)")
    parser.add_argument("--experiment", default="distalign-eval", help="experiment of a new eval run")
    parser.add_argument("--no-mlflow", action="store_true", help="write files only")
