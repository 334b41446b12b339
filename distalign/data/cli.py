"""``distalign mine-constraints``: its arguments and handler (light at import: the miners load when it runs)."""

from __future__ import annotations

from pathlib import Path

from distalign.errors import InputError, require_writable


def run_mining(args) -> int:
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


def register(subparsers, arguments: bool) -> None:
    """`distalign mine-constraints SOURCE ...`"""
    mine = subparsers.add_parser(
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
    mine.set_defaults(func=run_mining)
