"""``distalign transfer``'s flags, and those ``distalign eval`` shares for its transfer tasks: argparse set-up
only, from the spec's defaults and the task registry (no model or data library imported).
"""

from __future__ import annotations

from distalign.transfer.tasks.registry import TRANSFER_TASKS
from distalign.transfer.transfer_spec import TransferSpec


def add_transfer_arguments(parser) -> None:
    """``distalign transfer``'s arguments: the model, the spec and its overrides, the tasks, then the flags it shares
    with ``distalign eval`` (``add_shared_arguments``)."""
    d = TransferSpec()
    parser.add_argument("model", nargs="?", help="Hugging Face model directory, distalign checkpoint or hub name")
    parser.add_argument(
        "overrides", nargs="*", help="dotted key=value overrides of the spec, right after the model (finetune.epochs=1)"
    )
    parser.add_argument(
        "--spec", help="transfer spec YAML (keys: the fields of distalign.transfer.transfer_spec.TransferSpec)"
    )
    parser.add_argument("--tasks", help=f"comma list of {','.join(TRANSFER_TASKS)} (default {','.join(d.tasks)})")
    add_shared_arguments(parser)
    parser.add_argument("--use-gpu", action="store_true", default=None, help="a GPU per worker (NCCL)")
    parser.add_argument("--output-dir", help="tables (default $DISTALIGN_HOME/transfer_results/<model>-<time>)")
    parser.add_argument(
        "--tracking-uri", help="MLflow store (default $MLFLOW_TRACKING_URI, else sqlite:///$DISTALIGN_HOME/mlflow.db)"
    )
    parser.add_argument("--experiment", help=f"MLflow experiment (default {d.tracking.experiment})")
    parser.add_argument("--no-mlflow", action="store_true", default=None, help="write files only")


def add_shared_arguments(parser) -> None:
    """The transfer flags ``distalign eval`` also takes for its transfer tasks (every one but the model, spec,
    tasks, output and MLflow flags, which it has of its own)."""
    d = TransferSpec()
    parser.add_argument(
        "--data-dir",
        help="<data-dir>/<task>/<lang>/: a save_to_disk folder, or train/dev/test "
        "files (.tsv pairs, .conll NER, .conllu POS, .json QA)",
    )
    parser.add_argument(
        "--hub",
        action="store_true",
        default=None,
        help="load what --data-dir lacks from the Hugging Face Hub (needs internet)",
    )
    parser.add_argument(
        "--hub-config",
        action="append",
        metavar="TASK:LANG=CONFIG",
        help="a Hub config for one task and language (udpos:de=de_hdt); repeatable",
    )
    parser.add_argument("--source", help=f"fine-tuning language (default {d.source})")
    parser.add_argument(
        "--tydiqa-train",
        choices=["squad", "tydiqa"],
        help="tydiqa's training set: SQuAD v1.1 (default, XTREME's) or TyDiQA-GoldP's own English "
        "train set (XTREME's SRC=tydiqa; its English dev set selects)",
    )
    parser.add_argument("--langs", help="target languages (default: every <data-dir>/<task>/<lang> but the source)")
    parser.add_argument(
        "--select-on",
        choices=["source", "target"],
        help="dev sets that select the epoch (default source: XTREME's zero-shot protocol)",
    )
    parser.add_argument("--seeds", type=int, help=f"fine-tuning runs per task (default {d.seeds})")
    parser.add_argument("--lr", type=float, help="learning rate for every task (default: each task's own)")
    parser.add_argument("--batch-size", type=int, help="global batch for every task (default: each task's own)")
    parser.add_argument("--epochs", type=int, help="epochs for every task (default: each task's own)")
    parser.add_argument("--max-length", type=int, help="subword tokens per example (default: each task's own)")
    parser.add_argument(
        "--select-every",
        type=int,
        help="optimizer steps between dev evaluations, each a "
        "selection candidate (0 = each epoch; default: each task's)",
    )
    parser.add_argument("--max-train-examples", type=int, help="use the first N training examples (0 = all)")
    parser.add_argument("--max-eval-examples", type=int, help="use the first N of each dev/test set (0 = all)")
    parser.add_argument("--workers", type=int, help=f"Ray Train workers per run (default {d.num_workers})")
    parser.add_argument("--cpus-per-worker", type=float, help=f"(default {d.cpus_per_worker})")
    parser.add_argument(
        "--compare-to",
        action="append",
        metavar="SUMMARY",
        help="summary.csv (or its folder) of an earlier evaluation, e.g. of the starting model: "
        "bars beside this model's in the plot per task; repeatable",
    )
