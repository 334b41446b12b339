"""``distalign static extract|align|bli``: their arguments and handlers (light at import: the static-vector
modules load when a command runs or its arguments are set up)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import get_args

from distalign.errors import require_writable


def run_extract(args) -> int:
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


def run_align(args) -> int:
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


def run_bli(args) -> int:
    from distalign.eval.static_vectors_bli import run_static_bli_cli

    return run_static_bli_cli(args)


def register(subparsers, arguments: bool) -> None:
    """`distalign static extract|align|bli ...`"""
    static = subparsers.add_parser(
        "static", help="static word vectors: X2Static extraction, Procrustes / VecMap alignment, BLI"
    )
    if not arguments:
        return
    from distalign.eval.static_vectors_bli_arguments import add_static_bli_arguments
    from distalign.objectives.static_mapping import StaticMapping

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
    extract.set_defaults(func=run_extract)
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
    align.set_defaults(func=run_align)
    bli = static.add_parser(
        "bli",
        help="BLI of static vectors (.vec files), ranked as distalign eval's bli task",
        description="Rank each test dictionary's queries among the target language's vectors "
        "(cosine or CSLS, grouped or per-pair queries): the static-contextual "
        "paper's Tables 1 and 5.",
    )
    add_static_bli_arguments(bli)
    bli.set_defaults(func=run_bli)
