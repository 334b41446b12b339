"""``distalign check CONFIG [key=value ...]``: every check ``distalign train`` makes before Ray, without training.

All problems are reported at once, each naming its key, and the command exits non-zero; a config that passes gets
a short report of what the run would read (counts per language), the model, tracking, storage and the cluster's
size. Nothing is trained and no Ray cluster is started (one in RAY_ADDRESS is joined to count its CPUs and GPUs).
A light module: ``distalign --help`` imports it to list the command; the checks are imported when it runs.
"""

from __future__ import annotations


def run_check(args) -> int:
    import time

    import distalign.transfer.training  # noqa: F401  (registers eval.transfer's check: `distalign train` runs it)
    from distalign.logs import say
    from distalign.train.preflight import load_checked

    start = time.perf_counter()
    checked = load_checked(args.config, args.overrides, build_model=False)
    say(f"{args.config}: every check passed in {time.perf_counter() - start:.1f} s")
    for line in checked.found:
        say(f"  {line}")
    return 0


def register(subparsers, arguments: bool) -> None:
    check = subparsers.add_parser(
        "check",
        help="run every check `distalign train` makes before Ray, without training; report all problems",
        description="Check an experiment config as `distalign train` would before it starts Ray: the config's values, "
        "the storage (writable), the tracking server (answers), the cluster's CPUs and GPUs (RAY_ADDRESS, "
        "else this machine), every input read and counted (constraints, dictionaries, corpora, "
        "evaluation data) and the model's config and tokenizer (never its weights). Every problem is "
        "reported, each naming its key, with exit status 2; else a short report of what was found.",
    )
    if not arguments:
        return
    check.add_argument("config", help="experiment YAML (e.g. jobs/configs/quickstart.yaml)")
    check.add_argument("overrides", nargs="*", help="key.sub=value overrides, as for distalign train")
    check.set_defaults(func=run_check)
