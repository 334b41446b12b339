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
import sys

# Only light modules here: a command's own modules (torch, Ray, MLflow, ...) are imported when it runs or its
# arguments are set up (build_parser), so that `distalign --help` and the commands that need no cluster start fast.
# Each room registers its own command; the train and tune commands, which join several rooms, are set up here.
from distalign import check_command
from distalign.benchmark_data import command as data_command
from distalign.config.environment import command_log
from distalign.data import cli as mining_cli
from distalign.errors import ConfigError, InputError
from distalign.logs import configure, quiet_console, say
from distalign.model_store import model_fetch as model_command
from distalign.ray_session import leaving_ray, shutdown_ray
from distalign.static import cli as static_cli
from distalign.synthetic_languages import cli as synthetic_languages_cli
from distalign.tools.bench import cli as bench_tools_cli
from distalign.transfer import cli as transfer_cli


def _train(args) -> int:
    from distalign.studies.experiment import run_experiment  # (its import registers eval.transfer's check)
    from distalign.train import run_summary
    from distalign.train.preflight import load_checked
    from distalign.train.startup import since_process_start

    clock = since_process_start()  # the start-up phases begin with the command, imports included
    # `distalign check`'s checks, every problem reported at once, before training takes Ray resources
    checked = load_checked(args.config, args.overrides)
    config = checked.config
    with quiet_console(command_log("train")), leaving_ray():  # a caller's Ray session (a test's) stays up
        outcome = run_experiment(config, checked=checked, clock=clock, progress=say)
    run_summary.print_summary(config, outcome.training)
    return 0


def _tune(args) -> int:
    from distalign.studies import run_study
    from distalign.synthetic_languages.tune_studies import is_bench_study, run_bench_study

    with quiet_console(command_log("tune"), worker_lines="warnings"):  # the trials' progress lines stand for them
        try:
            (run_bench_study if is_bench_study(args.study) else run_study)(args.study, args.overrides)
        finally:
            shutdown_ray()
    return 0


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


def _add_bench_command(sub, arguments: bool, preset: str = "") -> None:
    """`distalign bench synthetic|streaming|perf|memory|scale|startup ...`: the synthetic-language benchmark (a
    product room) and the tools' benches; ``preset``: the synthetic benchmark's defaults from a preset."""
    bench = sub.add_parser("bench", help="controlled benchmarks")
    if not arguments:
        return
    bench = bench.add_subparsers(dest="bench", required=True)
    synthetic_languages_cli.register(bench, preset)
    bench_tools_cli.register(bench)


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
    transfer_cli.register_eval(sub, command in (None, "eval"))
    transfer_cli.register_transfer(sub, command in (None, "transfer"))
    mining_cli.register(sub, command in (None, "mine-constraints"))
    static_cli.register(sub, command in (None, "static"))
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
