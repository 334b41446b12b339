"""``distalign`` command line: train, tune, eval.

distalign train jobs/configs/quickstart.yaml train.max_steps=50 train.engine=deepspeed train.zero_stage=2
distalign check jobs/configs/quickstart.yaml storage.path=s3://bucket/runs
distalign tune tuning/quickstart.yaml
distalign eval --checkpoint runs/quickstart/checkpoint_... --tasks bli,xlsim,tatoeba
distalign eval --checkpoint runs/quickstart/checkpoint_... --tasks bli,udpos --data-dir data/transfer --seeds 3
distalign eval --spec my_eval.yaml suite.max_queries=100
distalign transfer runs/quickstart/checkpoint_... --tasks xnli,udpos --data-dir data/transfer --seeds 3
distalign bench synthetic
distalign bench streaming --sizes-mb 20,2048 --steps 100
distalign bench perf
distalign bench memory --models base,large --batch 64 --seq 512 --gpus 8
distalign bench scale --pairs 1e5,1e6 --units 1e4,1e5,1e6
distalign bench startup --rounds 3 --start-cluster
distalign data fetch g-bli tatoeba multisimlex omw
distalign mine-constraints ~/.cache/distalign/data/lexicons/omw --languages fr,it,hr --out constraints.parquet
distalign static bli --vectors de=de.vec --vectors en=en.vec --dictionary de-en:test.tsv --similarity csls
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import get_args

# Only light modules here: a command's own modules (torch, Ray, MLflow, ...) are imported when it runs or its
# arguments are set up (build_parser), so that `distalign --help` and the commands that need no cluster start fast
from distalign import check_command
from distalign.bench.scale_cli import register as register_bench_scale
from distalign.bench.startup import register as register_bench_startup
from distalign.benchmark_data import command as data_command
from distalign.errors import ConfigError, InputError, require_writable
from distalign.logs import configure, quiet_console, say
from distalign.model_store import fetch as model_command
from distalign.ray_session import leaving_ray, shutdown_ray


def _train(args) -> int:
    from distalign.train.preflight import load_checked
    from distalign.train.startup import since_process_start
    from distalign.transfer.experiment import run_experiment  # (its import registers eval.transfer's check)

    clock = since_process_start()  # the start-up phases begin with the command, imports included
    # `distalign check`'s checks, every problem reported at once, before training takes Ray resources
    checked = load_checked(args.config, args.overrides)
    config = checked.config
    with quiet_console(command_log("train")), leaving_ray():  # a caller's Ray session (a test's) stays up
        outcome = run_experiment(config, checked=checked, clock=clock, progress=say)
    print_summary(config, outcome.training)
    return 0


def command_log(command: str) -> Path:
    """Where a command's Ray and library output goes: $DISTALIGN_HOME/logs/<command>-<time>.log."""
    import time

    from distalign.config import distalign_home

    return distalign_home() / "logs" / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}.log"


# a tiny model on a few hundred examples: XTREME's settings are meant for base-size models on large training sets
# (lr 2e-5; a dev evaluation every 200/500 steps would never come)
SYNTHETIC_TRANSFER_FLAGS = "--tasks udpos,pawsx --lr 1e-3 --epochs 5 --select-every 0 --seeds 2"


def print_summary(config, outcome) -> None:
    from distalign.tracking import client_for, run_url

    client = client_for(config.tracking.uri)
    print("\n[distalign] done")
    print(f"  MLflow run:  {outcome.run_id} (experiment '{config.tracking.experiment}', {config.tracking.uri})")
    print(f"  checkpoint:  {outcome.checkpoint or '(none)'}")
    if outcome.best_checkpoint:
        print(f"  best (eval/selection/rel_mrr_gain): {outcome.best_checkpoint}")
    for key in ("Train/loss", "eval/bli/avg/mrr", "eval/selection/rel_mrr_gain"):
        history = sorted(client.get_metric_history(outcome.run_id, key), key=lambda m: m.step)
        if history:
            first, last = history[0], history[-1]
            print(f"  {key}: {first.value:.4f} (step {first.step}) -> {last.value:.4f} (step {last.step})")
    if not config.tracking.uri.startswith(("http://", "https://")):
        print(f"  open the UI: mlflow ui --backend-store-uri {config.tracking.uri} --port 5000")
    experiment = client.get_run(outcome.run_id).info.experiment_id
    print(f"  the run in the UI: {run_url(config.tracking.uri, experiment, outcome.run_id)}")
    command = synthetic_transfer_command(config, outcome.checkpoint)
    if command:
        print(f"  zero-shot transfer on the world's tasks: {command}")


def synthetic_transfer_command(config, checkpoint: str) -> str:
    """The ``distalign transfer`` command for the synthetic world's tasks (``data.synthetic.transfer_examples``),
    from its first language; "" when the run has none."""
    synthetic = config.data.synthetic
    if config.data.source != "synthetic" or not synthetic.transfer_examples or not checkpoint:
        return ""
    from distalign.preparation.inputs import synthetic_world

    tasks = synthetic_world(config).transfer_tasks  # the cached world: found, not generated again
    return (
        f"distalign transfer {checkpoint} {SYNTHETIC_TRANSFER_FLAGS} --data-dir {tasks} "
        f"--source {synthetic.languages[0]}"
    )


def _tune(args) -> int:
    from distalign.studies import run_study
    from distalign.studies.bench_study import is_bench_study, run_bench_study

    with quiet_console(command_log("tune"), worker_lines="warnings"):  # the trials' progress lines stand for them
        try:
            (run_bench_study if is_bench_study(args.study) else run_study)(args.study, args.overrides)
        finally:
            shutdown_ray()
    return 0


def _eval_command(args) -> int:
    """The transfer tasks of ``--tasks`` (``distalign transfer``'s runner, fed by eval's model and MLflow flags and
    the transfer flags), then the evaluation tasks; both specs are checked, and the transfer data read, before Ray."""
    from distalign.eval import runner as evaluation
    from distalign.transfer.runner import checkpoint_run, run_transfer, spec_from_args, validate
    from distalign.transfer.tasks.registry import TRANSFER_TASKS

    tasks = evaluation.comma_list(args.tasks) if args.tasks else []
    transfer = [name for name in tasks if name in TRANSFER_TASKS]
    if not transfer:
        return evaluation.run_eval_cli(args)
    if not (args.checkpoint or args.model):
        raise ConfigError(f"--tasks {','.join(transfer)}: transfer tasks need --checkpoint or --model")
    spec = spec_from_args(args, args.checkpoint or args.model, transfer)
    validate(spec)
    args.tasks = ",".join(name for name in tasks if name not in TRANSFER_TASKS)
    # its spec checked and benchmark files read now: an error there must not wait for the transfer's fine-tuning
    prepared = evaluation.prepare_eval(args) if args.tasks else None
    run_transfer(spec, evaluates=checkpoint_run(spec, evaluation.resolve_model(None, spec.model)))
    return evaluation.run_prepared(prepared) if prepared else 0


def _eval(args) -> int:
    """``_eval_command`` with Ray's and the libraries' output in a log file, as ``train`` and ``tune`` keep it."""
    with quiet_console(command_log("eval")), leaving_ray():
        return _eval_command(args)


def _transfer(args) -> int:
    from distalign.transfer.runner import run_transfer_cli

    with quiet_console(command_log("transfer")), leaving_ray():
        return run_transfer_cli(args)


def _mine(args) -> int:
    from distalign.data.mining import english_seed_words, mine_babelnet
    from distalign.data.omw import mine_omw

    if not Path(args.source).exists():
        raise InputError(
            f"{args.source}: not found: give the folder of OMW wn-data-<lang>.tab files, or a BabelNet export .tsv"
        )
    omw = Path(args.source).is_dir()
    mine = mine_omw if omw else mine_babelnet
    # BabelBERT §3.1/§4's synset filters by default on BabelNet, its resource; OMW has no English here and few glosses
    seed_words = args.seed_words if args.seed_words is not None else 0 if omw else 1000
    min_glosses = args.min_glosses if args.min_glosses is not None else 0 if omw else 2
    try:
        stopwords = Path(args.stopwords).read_text().split() if args.stopwords else None
    except OSError as err:
        raise InputError(
            f"--stopwords {args.stopwords}: {err.strerror}: give a file of whitespace-separated "
            "stopwords, or leave --stopwords out"
        ) from None
    require_writable(Path(args.out).parent, "--out")  # before the mining
    try:
        mine(
            args.source,
            [lang for lang in args.languages.split(",") if lang],
            args.top_k,
            args.exclude,
            args.out,
            cross_lingual=not args.no_cross_lingual,
            monolingual=not args.no_monolingual,
            unique_pairs=args.unique_pairs,
            min_glosses=min_glosses,
            seeds=english_seed_words(seed_words, stopwords) if seed_words else None,
        )
    except ValueError as err:  # unknown language for the frequency lists, bad top-k
        raise InputError(str(err)) from err
    return 0


def _bench_streaming(args) -> int:
    from distalign.bench.streaming import format_io_table, plot_io, run_io_bench, run_streaming_bench, write_corpora

    out = bench_output_dir(args, "bench_streaming")
    parts = set(args.parts.split(","))
    if "io" in parts and os.environ.get("RAY_AUTH_MODE") != "token":
        # Ray reads the auth mode once, when first imported: from the command's environment it holds for this
        # process and the nodes it starts alike
        raise SystemExit(
            "distalign bench streaming --parts io starts `ray start` nodes, which Ray 2.60 runs with "
            "token auth: run it as RAY_AUTH_MODE=token distalign bench streaming --parts io ..."
        )
    if "io" in parts:
        reads = run_io_bench(
            write_corpora(Path(args.config).resolve(), args.io_sizes_mb, out),
            [int(w) for w in args.workers.split(",")],
            args.nodes,
            args.unit_bytes,
            out,
        )
        table = format_io_table(reads)
        print(table)
        (out / "results-io.md").write_text(table + "\n")
        if args.plot:
            plot_io(reads, Path(args.plot))
    if "tokenize" in parts:
        from distalign.bench.feed_rate import feed_texts, format_feed_table, measure_feed

        texts = feed_texts(Path(args.text) if args.text else None, Path(args.config).resolve(), out)
        table = format_feed_table(measure_feed(texts, out, args.tokenize_mb, args.seq_length, args.vocab_size))
        print(table)
        (out / "results-tokenize.md").write_text(table + "\n")
    if "train" not in parts:
        return 0
    results = run_streaming_bench(Path(args.config).resolve(), args.sizes_mb, args.steps, out, args.overrides)
    return max(r.returncode for r in results)


def comma_floats(text: str) -> list[float]:
    """An argparse type: ``20,2048`` -> [20.0, 2048.0] (argparse names the flag when it raises)."""
    try:
        return [float(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None


def bench_output_dir(args, name: str) -> Path:
    """A bench's --output-dir (default $DISTALIGN_HOME/<name>), checked writable before the bench starts."""
    from distalign.config import distalign_home

    out = Path(args.output_dir).resolve() if args.output_dir else distalign_home() / name
    require_writable(out, "--output-dir")
    return out


def _bench_perf(args) -> int:
    from distalign.bench.perf import run_perf_bench

    run_perf_bench(
        bench_output_dir(args, "bench_perf"),
        args.steps,
        log_to_mlflow=not args.no_mlflow,
        areas=tuple(args.rows.split(",")),
    )
    return 0


def _bench_memory(args) -> int:
    from distalign.bench.memory import MODELS, run_memory_bench

    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        raise ConfigError(f"--models {args.models}: give a comma list of {', '.join(MODELS)}")
    if min(args.batch, args.seq, args.gpus) < 1 or args.seq > 512:
        raise ConfigError("--batch and --gpus must be >= 1, --seq in 1..512 (XLM-R's positions)")
    run_memory_bench(bench_output_dir(args, "bench_memory"), models, args.batch, args.seq, args.gpus, progress=say)
    return 0


def _bench_synthetic(args) -> int:
    from distalign.bench.synthetic import BenchSpec, run_bench

    bench_output_dir(args, "bench_synthetic")  # its default is the bench's own
    run_bench(
        BenchSpec(
            corpus=args.corpus,
            max_sentences=args.max_sentences,
            transformations=tuple(args.transformations.split(",")),
            objectives=tuple(args.objectives.split(",")),
            dictionary_share=args.dictionary_share,
            eval_words=args.eval_words,
            min_count=args.min_count,
            seed=args.seed,
            output_dir=args.output_dir,
            overrides=[*args.preset_overrides, *args.overrides],
            syntax_target=args.syntax_target,
            seeds=args.seeds,
            train_seed=args.train_seed,
            parallel_share=args.parallel_share,
            transfer_tasks=tuple(filter(None, args.transfer_tasks.split(","))),
            transfer_data=args.transfer_data,
            transfer_lang=args.transfer_lang,
            world=args.world,
            world_concepts=args.world_concepts,
            finetune_lr=args.finetune_lr,
            finetune_epochs=args.finetune_epochs,
            shared_words=args.shared_words,
        )
    )
    return 0


def _bench_preset_defaults(name: str) -> dict:
    """A bench preset's fields as ``distalign bench synthetic``'s defaults (its training overrides go before the
    command's own, which win)."""
    from distalign.bench.synthetic import load_preset

    values = {
        key: ",".join(value) if isinstance(value, tuple) else value for key, value in vars(load_preset(name)).items()
    }
    values["preset_overrides"] = values.pop("overrides")
    return values


def _static_extract(args) -> int:
    from distalign.model_store.locate import locate_model

    require_writable(Path(args.out).parent, "--out")  # before the teacher is distilled
    model = locate_model(args.model, "--model", os.environ.get("DISTALIGN_STORAGE_ENDPOINT", ""))  # before the corpus
    from distalign.static.x2static import extract_to_file  # after: torch and transformers take seconds

    result = extract_to_file(
        model,
        args.corpus,
        args.out,
        layer=args.layer,
        epochs=args.epochs,
        lr=args.lr,
        negatives=args.negatives,
        min_count=args.min_count,
        seed=args.seed,
    )
    for report in result["reports"]:
        print(report.summary())
    print(f"[distalign] {result['words']} static vectors from {result['sentences']} sentences -> {result['path']}")
    return 0


def _static_align(args) -> int:
    from distalign.static.mapping import align_files

    report = align_files(
        args.src,
        args.tgt,
        args.dictionary,
        args.out,
        iterations=args.iterations,
        tgt_out_path=args.tgt_out or None,
        method=args.method,
    )
    print(
        f"[distalign] seed pairs {report['seed_pairs']} ({report['seed_missing']} with a missing word), "
        f"dictionary sizes {report['dictionary_sizes']} -> {args.out}"
    )
    return 0


def _static_bli(args) -> int:
    from distalign.static.bli import run_static_bli_cli

    return run_static_bli_cli(args)


def _add_train_command(sub, arguments: bool) -> None:
    """`distalign train CONFIG [key=value ...]`"""
    train = sub.add_parser(
        "train",
        help="run one training job (local Ray, or the cluster in RAY_ADDRESS)",
        description="Train with the objectives of an experiment config. Overrides are "
        "dotted key=value pairs (train.lr=1e-4). A run started again with the "
        "same run.name resumes from its last checkpoint.",
    )
    if not arguments:
        return
    train.add_argument("config", help="experiment YAML (e.g. jobs/configs/quickstart.yaml)")
    train.add_argument("overrides", nargs="*", help="key.sub=value overrides")
    train.set_defaults(func=_train)


def _add_tune_command(sub, arguments: bool) -> None:
    """`distalign tune STUDY [key=value ...]`"""
    tune = sub.add_parser(
        "tune",
        help="run a Ray Tune study (one MLflow parent run, a child run per trial)",
        description="A study over config keys (grid or search); each trial is a full training "
        "run (a one-worker trial trains in the trial's own process).",
    )
    if not arguments:
        return
    tune.add_argument("study", help="study YAML (e.g. tuning/quickstart.yaml)")
    tune.add_argument(
        "overrides",
        nargs="*",
        help="key.sub=value overrides: of the study for a study key (grid.train.lr=[1e-3,3e-4], "
        "max_concurrent_trials=2), else of every trial (train.max_steps=60)",
    )
    tune.set_defaults(func=_tune)


def _add_eval_command(sub, arguments: bool) -> None:
    """`distalign eval ...` (its arguments live with the runner)"""
    ev = sub.add_parser(
        "eval",
        help="evaluate a checkpoint or model on BLI, XLSIM, Tatoeba, alignment (Ray)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Encode with every layer, score task x language pair x layer as Ray tasks, "
        "write tables and plots, log them to MLflow. What to run: a --spec YAML "
        "(the fields of distalign.eval.spec.EvalSpec), then the flags given, "
        "then dotted key=value overrides (suite.max_queries=100).",
    )
    if not arguments:
        return
    from distalign.eval.arguments import add_eval_arguments
    from distalign.transfer.arguments import add_shared_arguments
    from distalign.transfer.tasks.registry import TRANSFER_TASKS

    add_eval_arguments(ev)
    add_shared_arguments(
        ev.add_argument_group(
            "zero-shot transfer tasks",
            f"--tasks may also name {', '.join(TRANSFER_TASKS)}: each fine-tuned and tested "
            "as `distalign transfer` does (these flags, as there), logged as a child run of the checkpoint's training "
            "run at its step when the MLflow store knows it, else a new run in --experiment "
            "(default distalign-transfer)",
        )
    )
    ev.set_defaults(func=_eval)


def _add_transfer_command(sub, arguments: bool) -> None:
    """`distalign transfer ...` (its arguments live with the runner)"""
    about = (
        "Fine-tune on each task's source-language training set (one Ray Train run per task and seed), keep "
        "the weights best on the dev set, and print per-language test scores, their average and the gap to the "
        "source as mean ± std over seeds."
    )
    if arguments:  # the task list from the registry (not read for the command list, which names no task)
        from distalign.transfer.tasks.registry import TRANSFER_TASKS

        about += f" Tasks: {', '.join(TRANSFER_TASKS)}."
    transfer = sub.add_parser(
        "transfer",
        help="zero-shot cross-lingual transfer on XTREME-style tasks: fine-tune on "
        "the source language, test on the others (Ray Train)",
        description=about,
    )
    if not arguments:
        return
    from distalign.transfer.arguments import add_transfer_arguments

    add_transfer_arguments(transfer)
    transfer.set_defaults(func=_transfer)


def _add_mine_constraints_command(sub, arguments: bool) -> None:
    """`distalign mine-constraints SOURCE ...`"""
    mine = sub.add_parser(
        "mine-constraints",
        help="lexical constraints from multilingual synsets (OMW, BabelNet)",
        description="BabelBERT-style mining: all monolingual and cross-lingual synonym pairs per "
        "synset, words in the top-k of their language's frequency list (wordfreq), "
        "multi-word expressions and evaluation words removed, glosses attached.",
    )
    if not arguments:
        return
    mine.add_argument(
        "source",
        help="folder of OMW wn-data-<lang>.tab files (`distalign data fetch omw` puts them in "
        "<data home>/lexicons/omw), "
        "or a BabelNet export .tsv (synsetID lang1 lang2 word1 word2 sent1 sent2)",
    )
    mine.add_argument(
        "--languages",
        required=True,
        help="comma-separated codes or English names (fr,it,hr = fra,ita,hrv = French,Italian,Croatian)",
    )
    mine.add_argument("--top-k", type=int, default=15000, help="frequency-list cut-off per language")
    mine.add_argument(
        "--exclude",
        nargs="*",
        default=[],
        metavar="TSV",
        help="evaluation dictionaries whose words must not appear (file names carry the pair)",
    )
    mine.add_argument("--out", required=True, help="output parquet (use as data.constraints)")
    mine.add_argument("--no-monolingual", action="store_true")
    mine.add_argument("--no-cross-lingual", action="store_true")
    mine.add_argument("--unique-pairs", action="store_true", help="keep a pair only for its first synset")
    mine.add_argument(
        "--seed-words",
        type=int,
        default=None,
        metavar="N",
        help="only synsets with one of the N most frequent English words (stopwords removed; needs en "
        "in --languages); 0 = every synset. Default: 1000 for a BabelNet export (BabelBERT), "
        "0 for OMW",
    )
    mine.add_argument(
        "--stopwords",
        default="",
        metavar="FILE",
        help="stopwords left out of the seeds, whitespace-separated (default: scikit-learn's English "
        "list; the paper used NLTK's)",
    )
    mine.add_argument(
        "--min-glosses",
        type=int,
        default=None,
        metavar="K",
        help="only synsets with glosses in at least K of --languages. Default: 2 for a BabelNet "
        "export (BabelBERT), 0 for OMW",
    )
    mine.set_defaults(func=_mine)


def _add_static_command(sub, arguments: bool) -> None:
    """`distalign static extract|align|bli ...`"""
    static = sub.add_parser(
        "static", help="static word vectors: X2Static extraction, Procrustes / VecMap alignment, BLI"
    )
    if not arguments:
        return
    from distalign.objectives.static_mapping import StaticMapping
    from distalign.static.arguments import add_static_bli_arguments

    static = static.add_subparsers(dest="static", required=True)
    extract = static.add_parser(
        "extract",
        help="X2Static vectors from an encoder (word2vec text format)",
        description="CBOW-like distillation (Gupta & Jaggi 2021): context = mean of the "
        "sentence's other token states at --layer, 10 negatives ∝ count^0.5.",
    )
    extract.add_argument("--model", required=True, help="teacher: HF model directory, hub name or s3:// URI")
    extract.add_argument("--corpus", nargs="+", required=True, help=".txt (a sentence a line), .jsonl or .parquet")
    extract.add_argument("--out", required=True, help="output .vec (word2vec text format)")
    extract.add_argument("--layer", type=int, default=6, help="teacher layer (6 for XLM-R base)")
    extract.add_argument("--epochs", type=int, default=1)
    extract.add_argument("--lr", type=float, default=1e-3)
    extract.add_argument("--negatives", type=int, default=10)
    extract.add_argument("--min-count", type=int, default=1)
    extract.add_argument("--seed", type=int, default=0)
    extract.set_defaults(func=_static_extract)
    align = static.add_parser(
        "align",
        help="map one static space onto another (Procrustes or VecMap)",
        description="Fit with a seed dictionary, optionally with self-learning rounds.",
    )
    align.add_argument("--src", required=True, help="source .vec")
    align.add_argument("--tgt", required=True, help="target .vec")
    align.add_argument("--dictionary", required=True, help="seed dictionary src<TAB>tgt")
    align.add_argument("--out", required=True, help="mapped source .vec")
    align.add_argument("--tgt-out", default="", help="also write the mapped target space here (required by vecmap)")
    align.add_argument(
        "--iterations",
        type=int,
        default=0,
        help="self-learning rounds (0 = seed only; vecmap: at most this many, semi-supervised)",
    )
    align.add_argument(
        "--method",
        choices=get_args(StaticMapping),
        default="procrustes",
        help="procrustes: orthogonal map onto the normalised target; vecmap: Artetxe et al. 2018's "
        "whitening, orthogonal map, re-weighting, de-whitening (the static-contextual paper's)",
    )
    align.set_defaults(func=_static_align)
    bli = static.add_parser(
        "bli",
        help="BLI of static vectors (.vec files), ranked as distalign eval's bli task",
        description="Rank each test dictionary's queries among the target language's vectors "
        "(cosine or CSLS, grouped or per-pair queries): the static-contextual "
        "paper's Tables 1 and 5.",
    )
    add_static_bli_arguments(bli)
    bli.set_defaults(func=_static_bli)


def _add_bench_command(sub, arguments: bool, preset: str = "") -> None:
    """`distalign bench synthetic|streaming|perf|memory|scale|startup ...`; ``preset``: the synthetic bench's defaults
    from a preset."""
    bench = sub.add_parser("bench", help="controlled benchmarks")
    if not arguments:
        return
    bench = bench.add_subparsers(dest="bench", required=True)
    synthetic = bench.add_parser(
        "synthetic",
        help="align a language with a transformed copy of itself (ALIGN-MLM's controlled setting)",
        description="Derive a second language from a base corpus (transliteration, + inversion, + permutation, "
        "+ syntax from a parsed corpus), "
        "train a small model from scratch per transformation x objective set, report the alignment "
        "score and BLI MRR on held-out dictionary words (printed, results.md, MLflow).",
    )
    synthetic.add_argument("overrides", nargs="*", help="training-config overrides (jobs/configs/bench_synthetic.yaml)")
    synthetic.add_argument(
        "--corpus",
        default="",
        help="base corpus, one sentence a line, or parsed sentences "
        "(.conllu, needed by translit_syn) (default: English side "
        "of Tatoeba in the data home: distalign data fetch tatoeba)",
    )
    synthetic.add_argument("--max-sentences", type=int, default=20_000)
    synthetic.add_argument(
        "--transformations",
        default="translit,translit_inv,translit_perm",
        help="of translit, translit_inv, translit_perm, translit_syn (needs a .conllu corpus)",
    )
    synthetic.add_argument(
        "--syntax-target",
        default="fra",
        help="translit_syn: the language whose word order the sentences take, a code (its URIEL "
        "word-order features) or a treebank of it (.conllu) (ALIGN-MLM: French)",
    )
    synthetic.add_argument(
        "--objectives", default="mlm,align", help="objective sets: mlm, align, lexical, xlm, dict_mlm"
    )
    synthetic.add_argument(
        "--dictionary-share",
        type=float,
        default=0.25,
        help="dictionary words as a share of the base corpus's word types (ALIGN-MLM: 0.25)",
    )
    synthetic.add_argument("--eval-words", type=int, default=300, help="dictionary words held out for evaluation")
    synthetic.add_argument(
        "--shared-words",
        type=float,
        default=0.0,
        help="share of the base corpus's word types the derived language keeps untransliterated "
        "(shared vocabulary; never dictionary words)",
    )
    synthetic.add_argument("--min-count", type=int, default=3, help="rarer words get no dictionary entry")
    synthetic.add_argument("--seed", type=int, default=0)
    synthetic.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="pre-training (and fine-tuning) runs per cell, "
        "seeds --train-seed, +1, ...: mean ± std (ALIGN-MLM's table: 3 or more)",
    )
    synthetic.add_argument("--train-seed", type=int, default=None, help="the first cell seed (default --seed)")
    synthetic.add_argument(
        "--parallel-share",
        type=float,
        default=None,
        help="xlm: TLM's pairs as a share of the base corpus, 0-1 (ALIGN-MLM Table 1; 0 = MLM "
        "alone; default every sentence's twin)",
    )
    synthetic.add_argument(
        "--transfer-tasks",
        default="",
        help="measure transfer (Δ, Spearman ρ): comma list of "
        "udpos, pawsx, xnli, read from --transfer-data in --transfer-lang (default with --world: "
        "udpos,pawsx)",
    )
    synthetic.add_argument(
        "--transfer-data",
        default="",
        help="<DIR>/<task>/<lang>/: the base language's labelled data, as distalign transfer reads it",
    )
    synthetic.add_argument("--transfer-lang", default="", help="the base language's name in --transfer-data")
    synthetic.add_argument(
        "--world",
        type=int,
        default=0,
        metavar="N",
        help="base corpus and tasks from a synthetic world (N task examples per split; parsed by "
        "its grammar for translit_syn, which takes --transfer-tasks udpos)",
    )
    synthetic.add_argument("--world-concepts", type=int, default=2000, help="--world: its concepts (vocabulary)")
    synthetic.add_argument(
        "--output-dir",
        default="",
        help="default $DISTALIGN_HOME/bench_synthetic (an existing one reuses the cells finished with the same inputs)",
    )
    synthetic.add_argument("--finetune-lr", type=float, default=1e-3, help="transfer: fine-tuning learning rate")
    synthetic.add_argument("--finetune-epochs", type=int, default=5, help="transfer: fine-tuning epochs")
    synthetic.add_argument(
        "--preset",
        default="",
        help="the defaults of every flag above and training overrides "
        "from jobs/bench_presets/<PRESET>.yaml (paper-shape: ALIGN-MLM's Table 8 pattern) or a YAML "
        "file; flags and overrides given win",
    )
    synthetic.set_defaults(func=_bench_synthetic, preset_overrides=[])
    if preset:
        synthetic.set_defaults(**_bench_preset_defaults(preset))

    streaming = bench.add_parser(
        "streaming",
        help="bytes read and workers' shares for 1-8 workers; driver memory and time to the first step "
        "vs corpus size (streamed corpora)",
        description="Write corpora of the given sizes (many .txt shards). io: read an epoch with W workers on loopback "
        "Ray nodes, from S3 (moto) and local files, counting the bytes storage served (results-io.md). "
        "train: train MLM on each as a subprocess, report the driver's peak RSS and the time to the first "
        "step (results.md).",
    )
    streaming.add_argument(
        "--parts",
        default="io,train",
        help="io (bytes read, workers' shares, on loopback nodes "
        "and S3 on moto), train (driver memory, first step), "
        "tokenize (tokens a CPU core feeds, against a GPU)",
    )
    streaming.add_argument(
        "--text", default="", help="tokenize: a text file, a sentence a line (default: the synthetic world's sentences)"
    )
    streaming.add_argument("--tokenize-mb", type=float, default=4, help="tokenize: MB of text (the text repeated)")
    streaming.add_argument("--seq-length", type=int, default=512, help="tokenize: data.max_seq_length")
    streaming.add_argument("--vocab-size", type=int, default=16000, help="tokenize: the Unigram tokenizer's pieces")
    streaming.add_argument(
        "--io-sizes-mb", default="16,64", type=comma_floats, help="io: comma-separated corpus sizes in MB"
    )
    streaming.add_argument("--workers", default="1,2,4,8", help="io: numbers of workers")
    streaming.add_argument("--nodes", type=int, default=2, help="io: ray start nodes on loopback")
    streaming.add_argument("--unit-bytes", type=int, default=2**20, help="io: data.corpus_unit_bytes")
    streaming.add_argument("--plot", default="", help="io: write the figures to this PNG")
    streaming.add_argument("--config", default="jobs/configs/quickstart.yaml")
    streaming.add_argument(
        "--sizes-mb", default="20,2048", type=comma_floats, help="train: comma-separated corpus sizes in MB"
    )
    streaming.add_argument("--steps", type=int, default=100)
    streaming.add_argument(
        "--output-dir",
        default="",
        help="default $DISTALIGN_HOME/bench_streaming (corpora already written there are reused)",
    )
    streaming.add_argument("overrides", nargs="*", help="training-config overrides")
    streaming.set_defaults(func=_bench_streaming)

    perf = bench.add_parser(
        "perf",
        help="step overhead, start-up, data path, evaluation, scaling and fine-tuning against their anchors",
        description="Each row pairs distalign with an anchor timed in the same run (a bare PyTorch loop, the "
        "BabelBERT authors' BLI method, the step's consumption rate, the Hugging Face Trainer): printed, "
        "results.md, MLflow.",
    )
    perf.add_argument("--steps", type=int, default=20, help="timed steps per round (3 rounds per side)")
    perf.add_argument("--output-dir", default="", help="default $DISTALIGN_HOME/bench_perf")
    perf.add_argument("--no-mlflow", action="store_true", help="do not log the results to MLflow")
    perf.add_argument(
        "--rows",
        default="step,evaluation,startup,run,run2,data,gpu,finetune",
        help="comma-separated areas to measure (step includes scaling; data times the steps too; run, "
        "run2: a real quickstart run with 1, 2 workers against a plain PyTorch script in as many "
        "processes; finetune: distalign transfer's step "
        "against the Hugging Face Trainer); "
        "--rows gpu on a GPU node needs neither Ray nor MLflow with --no-mlflow",
    )
    perf.set_defaults(func=_bench_perf)

    memory = bench.add_parser(
        "memory",
        help="peak GPU memory per GPU of each objective's step (XLM-R base/large; DDP, ZeRO-2, ZeRO-3) and "
        "the largest batch that fits 80 and 141 GB",
        description="Weights, gradients and optimizer state by the ZeRO accounting, the objectives' own parameters "
        "and state sized from the built objectives, and the activations of one forward and backward "
        "traced on CPU with fake tensors (no GPU, seconds per objective): printed and results.md.",
    )
    memory.add_argument("--models", default="base,large", help="comma list of base, large (XLM-R)")
    memory.add_argument("--batch", type=int, default=64, help="sequences per GPU")
    memory.add_argument("--seq", type=int, default=512, help="tokens per sequence")
    memory.add_argument("--gpus", type=int, default=8, help="N: the GPUs ZeRO partitions over")
    memory.add_argument("--output-dir", default="", help="default $DISTALIGN_HOME/bench_memory")
    memory.set_defaults(func=_bench_memory)
    register_bench_scale(bench)
    register_bench_startup(bench)


def _transfer_data():
    """The transfer tasks `data fetch` saves from the Hub, and their fetcher (imported when it runs: not light)."""
    from distalign.transfer import hub_fetch

    return tuple(hub_fetch.TRANSFER_TASKS), hub_fetch.fetch_transfer_sets


def build_parser(bench_preset: str = "", command: str | None = None) -> argparse.ArgumentParser:
    """Every command listed with its help; the arguments of ``command`` alone when it is given (the console
    script's way: setting up eval's, transfer's or static's arguments imports their modules), else of them all."""
    parser = argparse.ArgumentParser(
        prog="distalign", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    _add_train_command(sub, command in (None, "train"))
    check_command.register(sub, command in (None, "check"))
    _add_tune_command(sub, command in (None, "tune"))
    _add_eval_command(sub, command in (None, "eval"))
    _add_transfer_command(sub, command in (None, "transfer"))
    _add_mine_constraints_command(sub, command in (None, "mine-constraints"))
    _add_static_command(sub, command in (None, "static"))
    _add_bench_command(sub, command in (None, "bench"), bench_preset)
    data_command.register(sub, command in (None, "data"), _transfer_data)
    model_command.register(sub, command in (None, "model"))
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = next((arg for arg in argv if not arg.startswith("-")), "")  # the parser has no options of its own
    args = build_parser(command=command).parse_args(argv)
    configure()  # progress lines and warnings of every command: the "distalign" logger
    try:
        if getattr(args, "preset", ""):  # parsed again with the preset's values as defaults: flags given win
            args = build_parser(args.preset, command).parse_args(argv)
        return args.func(args)
    except (ConfigError, InputError) as err:
        print(f"distalign: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
