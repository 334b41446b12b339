"""``distalign eval`` and ``distalign transfer``: their arguments and handlers. ``eval`` lives here, above both
rooms, because its ``--tasks`` may name transfer tasks too (run as ``distalign transfer`` runs them). Light at
import: the runners load when a command runs or its arguments are set up."""

from __future__ import annotations

import argparse

from distalign.config.environment import command_log
from distalign.errors import ConfigError
from distalign.logs import quiet_console
from distalign.ray_session import leaving_ray


def run_eval_and_transfer(args) -> int:
    """The transfer tasks of ``--tasks`` (``distalign transfer``'s runner, fed by eval's model and MLflow flags and
    the transfer flags), then the evaluation tasks; both specs are checked, and the transfer data read, before Ray."""
    from distalign.eval import checkpoint_eval as evaluation
    from distalign.transfer.tasks.registry import TRANSFER_TASKS
    from distalign.transfer.zero_shot import checkpoint_run, run_transfer, spec_from_args, validate

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


def run_eval(args) -> int:
    """``run_eval_and_transfer`` with Ray's and the libraries' output in a log file, as ``train`` and ``tune``
    keep it."""
    with quiet_console(command_log("eval")), leaving_ray():
        return run_eval_and_transfer(args)


def run_transfer(args) -> int:
    from distalign.transfer.zero_shot import run_transfer_cli

    with quiet_console(command_log("transfer")), leaving_ray():
        return run_transfer_cli(args)


def register_eval(subparsers, arguments: bool) -> None:
    """`distalign eval ...` (its arguments live with the runner)"""
    ev = subparsers.add_parser(
        "eval",
        help="evaluate a checkpoint or model on BLI, XLSIM, Tatoeba, alignment (Ray)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Encode with every layer, score task x language pair x layer as Ray tasks, "
        "write tables and plots, log them to MLflow. What to run: a --spec YAML "
        "(the fields of distalign.eval.eval_spec.EvalSpec), then the flags given, "
        "then dotted key=value overrides (suite.max_queries=100).",
    )
    if not arguments:
        return
    from distalign.eval.eval_arguments import add_eval_arguments
    from distalign.transfer.tasks.registry import TRANSFER_TASKS
    from distalign.transfer.transfer_arguments import add_shared_arguments

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
    ev.set_defaults(func=run_eval)


def register_transfer(subparsers, arguments: bool) -> None:
    """`distalign transfer ...` (its arguments live with the runner)"""
    about = (
        "Fine-tune on each task's source-language training set (one Ray Train run per task and seed), keep "
        "the weights best on the dev set, and print per-language test scores, their average and the gap to the "
        "source as mean ± std over seeds."
    )
    if arguments:  # the task list from the registry (not read for the command list, which names no task)
        from distalign.transfer.tasks.registry import TRANSFER_TASKS

        about += f" Tasks: {', '.join(TRANSFER_TASKS)}."
    transfer = subparsers.add_parser(
        "transfer",
        help="zero-shot cross-lingual transfer on XTREME-style tasks: fine-tune on "
        "the source language, test on the others (Ray Train)",
        description=about,
    )
    if not arguments:
        return
    from distalign.transfer.transfer_arguments import add_transfer_arguments

    add_transfer_arguments(transfer)
    transfer.set_defaults(func=run_transfer)
