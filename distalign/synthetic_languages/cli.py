"""``distalign bench synthetic``: the synthetic-language benchmark's arguments and handler (light at import: the
benchmark's modules load when it runs)."""

from __future__ import annotations

from distalign.config.environment import command_output_dir


def run_benchmark(args) -> int:
    from distalign.synthetic_languages.benchmark import BenchSpec, run_bench

    command_output_dir(args.output_dir, "bench_synthetic")  # its default is the bench's own
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


def preset_defaults(name: str) -> dict:
    """A bench preset's fields as ``distalign bench synthetic``'s defaults (its training overrides go before the
    command's own, which win)."""
    from distalign.synthetic_languages.benchmark import load_preset

    values = {
        key: ",".join(value) if isinstance(value, tuple) else value for key, value in vars(load_preset(name)).items()
    }
    values["preset_overrides"] = values.pop("overrides")
    return values


def register(bench, preset: str = "") -> None:
    """Add ``synthetic`` to the ``distalign bench`` subparsers ``bench``; ``preset``: its flags' defaults from
    a preset."""
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
    synthetic.set_defaults(func=run_benchmark, preset_overrides=[])
    if preset:
        synthetic.set_defaults(**preset_defaults(preset))
