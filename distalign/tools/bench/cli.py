"""``distalign bench streaming|perf|memory|scale|startup``: the performance and hardware benchmarks' arguments and
handlers (light at import: a bench's own modules load when it runs)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from distalign.config.environment import command_output_dir
from distalign.errors import ConfigError
from distalign.logs import say
from distalign.tools.bench import scale_cli, startup_bench


def run_streaming(args) -> int:
    from distalign.tools.bench.streaming import (
        format_io_table,
        plot_io,
        run_io_bench,
        run_streaming_bench,
        write_corpora,
    )

    out = command_output_dir(args.output_dir, "bench_streaming")
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
        from distalign.tools.bench.feed_rate import feed_texts, format_feed_table, measure_feed

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


def run_perf(args) -> int:
    from distalign.tools.bench.perf import run_perf_bench

    run_perf_bench(
        command_output_dir(args.output_dir, "bench_perf"),
        args.steps,
        log_to_mlflow=not args.no_mlflow,
        areas=tuple(args.rows.split(",")),
    )
    return 0


def run_memory(args) -> int:
    from distalign.tools.bench.memory import MODELS, run_memory_bench

    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in MODELS]
    if unknown or not models:
        raise ConfigError(f"--models {args.models}: give a comma list of {', '.join(MODELS)}")
    if min(args.batch, args.seq, args.gpus) < 1 or args.seq > 512:
        raise ConfigError("--batch and --gpus must be >= 1, --seq in 1..512 (XLM-R's positions)")
    run_memory_bench(
        command_output_dir(args.output_dir, "bench_memory"), models, args.batch, args.seq, args.gpus, progress=say
    )
    return 0


def register(bench) -> None:
    """Add the tools' benches to the ``distalign bench`` subparsers ``bench``."""
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
    streaming.set_defaults(func=run_streaming)

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
    perf.set_defaults(func=run_perf)

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
    memory.set_defaults(func=run_memory)
    scale_cli.register(bench)
    startup_bench.register(bench)
