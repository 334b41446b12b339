"""``distalign`` command line: train, tune, eval.

    distalign train jobs/configs/quickstart.yaml train.max_steps=50 train.engine=deepspeed train.zero_stage=2
    distalign tune jobs/configs/quickstart_tune.yaml
    distalign eval --model runs/quickstart/checkpoint_.../model --dictionary de-en:path/to/test.tsv
"""

from __future__ import annotations

import argparse
import sys

from distalign.config import ConfigError, load_config
from distalign.data.readers import InputError


def _train(args) -> int:
    from distalign.train.trainer import run_training

    config = load_config(args.config, args.overrides)
    outcome = run_training(config)
    print_summary(config, outcome)
    return 0


def print_summary(config, outcome) -> None:
    from distalign.tracking import client_for

    client = client_for(config.tracking.uri)
    print("\n[distalign] done")
    print(f"  MLflow run:  {outcome.run_id} (experiment '{config.tracking.experiment}', {config.tracking.uri})")
    print(f"  checkpoint:  {outcome.checkpoint or '(none)'}")
    for key in ("train/loss", "eval/bli/avg/mrr"):
        history = sorted(client.get_metric_history(outcome.run_id, key), key=lambda m: m.step)
        if history:
            first, last = history[0], history[-1]
            print(f"  {key}: {first.value:.4f} (step {first.step}) -> {last.value:.4f} (step {last.step})")
    print(f"  open the UI: mlflow ui --backend-store-uri {config.tracking.uri} --port 5000"
          "   (then http://127.0.0.1:5000)")


def _tune(args) -> int:
    from distalign.tuning import run_study

    run_study(args.study, args.overrides)
    return 0


def _eval(args) -> int:
    from distalign.eval.runner import run_eval_cli

    return run_eval_cli(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="distalign", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    train = sub.add_parser("train", help="run one training job (local Ray, or the cluster in RAY_ADDRESS)",
                           description="Train with the objectives of an experiment config. Overrides are "
                                       "dotted key=value pairs (train.lr=1e-4). A run started again with the "
                                       "same run.name resumes from its last checkpoint.")
    train.add_argument("config", help="experiment YAML (e.g. jobs/configs/quickstart.yaml)")
    train.add_argument("overrides", nargs="*", help="key.sub=value overrides")
    train.set_defaults(func=_train)

    tune = sub.add_parser("tune", help="run a Ray Tune study (one MLflow parent run, a child run per trial)",
                          description="Grid study over config keys; each trial is a full TorchTrainer run.")
    tune.add_argument("study", help="study YAML (e.g. jobs/configs/quickstart_tune.yaml)")
    tune.add_argument("overrides", nargs="*", help="key.sub=value overrides applied to every trial")
    tune.set_defaults(func=_tune)

    ev = sub.add_parser("eval", help="evaluate a model or checkpoint on BLI dictionaries",
                        description="BLI MRR of a Hugging Face model directory (a checkpoint's model/) or hub "
                                    "name on G-BLI/MUSE test dictionaries; optionally logged to MLflow.")
    ev.add_argument("--model", required=True, help="model directory, checkpoint directory or hub name")
    ev.add_argument("--dictionary", action="append", required=True, metavar="L1-L2:PATH",
                    help="test dictionary, repeatable (e.g. de-en:../shared/data/eval/bli/gbli/de-en/...tsv)")
    ev.add_argument("--layer", type=int, default=-1, help="hidden layer for word vectors (default: last)")
    ev.add_argument("--max-pairs", type=int, default=0, help="evaluate at most this many source words per pair")
    ev.add_argument("--tracking-uri", default="", help="log metrics to this MLflow store (default: do not log)")
    ev.add_argument("--experiment", default="distalign-eval")
    ev.set_defaults(func=_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, InputError) as err:
        print(f"distalign: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
