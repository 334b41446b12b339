"""``distalign bench scale``: its arguments and handler (light at import: the bench itself loads when it runs)."""

from __future__ import annotations

import argparse

from distalign.config.environment import command_output_dir


def sizes(text: str) -> list[int]:
    """An argparse type: ``1e4,1e5`` or ``10000,100000`` -> [10000, 100000], each a positive whole number."""
    try:
        values = [int(float(s)) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of sizes") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: sizes must be at least 1")
    return sorted(values)


def register(bench) -> None:
    """Add ``scale`` to the ``distalign bench`` subparsers ``bench``."""
    scale = bench.add_parser(
        "scale",
        help="time and memory of the driver's stages, the deal, the pickled plan and per-rank InfoNCE "
        "memory against the data size and W, each with its log-log slope (CPU, synthetic inputs)",
        description="Listing (F local files), constraint preparation (N pairs), the epoch deal (U units, W workers), "
        "the pickled TrainingPlan (N, U) and one rank's InfoNCE memory (W), on synthetic inputs in this "
        "process: printed, scale.md and scale.png in the output folder.",
    )
    scale.add_argument("--files", type=sizes, default=[100, 1000, 10000], help="listing: corpus files F")
    scale.add_argument(
        "--pairs",
        type=sizes,
        default=[100_000, 1_000_000],
        help="constraint pairs N (1e7 takes minutes and ~10 GB here)",
    )
    scale.add_argument("--units", type=sizes, default=[10_000, 100_000, 1_000_000], help="corpus units U")
    scale.add_argument("--workers", type=sizes, default=[8, 16, 32, 64, 128], help="worker counts W")
    scale.add_argument("--output-dir", default="", help="default $DISTALIGN_HOME/bench_scale")
    scale.set_defaults(func=run)


def run(args) -> int:
    from distalign.tools.bench.scale import Sizes, format_table, run_scale_bench

    out = command_output_dir(args.output_dir, "bench_scale")
    points = run_scale_bench(Sizes(args.files, args.pairs, args.units, args.workers), out)
    print(format_table(points))
    print(f"\nwritten: {out / 'scale.md'}, {out / 'scale.png'}")
    return 0
