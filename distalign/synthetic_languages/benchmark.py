"""``distalign bench synthetic``: does an alignment objective align a language with a transformed copy of itself?

For each transformation of the base corpus (``distalign.synthetic_languages.derived_language``) and each
objective set, a small model is trained from scratch on both languages; then we report the alignment
score (ALIGN-MLM's: the share, in %, of the base language's vocabulary tokens whose transliterated twin,
a token too, is their nearest input embedding by cosine among the derived language's whole vocabulary;
no mapping) and, on dictionary words held out from training, word alignment and BLI MRR against the
whole derived vocabulary. Words are encoded alone; layer 0 is the embedding output, where ALIGN-MLM acts.

With transfer tasks (``--transfer-tasks``; ``--world`` takes the base corpus and its tasks from a synthetic world),
each trained model is also fine-tuned on the base language's labelled data and tested on the same data carried into
the derived language (``distalign.synthetic_languages.derived_tasks``), through ``distalign.transfer``: Δ per task,
and across cells Spearman's ρ of alignment vs transfer and ALIGN-MLM's expected shape
(``distalign.synthetic_languages.transfer_study``). ``--seeds N`` pre-trains (and fine-tunes) every cell N times.

Everything lands in one MLflow parent run (a child run per training run) with the markdown
table as an artifact; the table is also printed.

A finished cell's scores are kept in ``<output_dir>/cells/``, under a key of everything they depend on (its
training config, the contents of its language pair's and transfer data's files, the held-out words and the
fine-tuning settings): a later bench into the same output directory reuses them instead of running the cell
again, so a long bench can run in pieces (one transformation or objective at a time) and a last invocation with
them all only aggregates. Anything changed in a cell's inputs runs it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
import torch

from distalign.benchmark_data import eval_dir, not_fetched
from distalign.checkpoint import MODEL_DIR
from distalign.config import distalign_home, load_config
from distalign.errors import InputError
from distalign.languages import LanguageCode
from distalign.preparation.cache import content_key
from distalign.synthetic_languages.derived_language import (
    NEEDS_PARSE,
    TRANSFORMATIONS,
    Transliteration,
    derive,
    normalise,
)
from distalign.synthetic_languages.syntax_transform import checked_target, read_conllu, syntax_transform
from distalign.synthetic_languages.transfer_study import cell_means, checks_markdown, spread

BASE_LANG, DERIVED_LANG = "en", "xx"
# objectives.<name>.weight per objective set (the others are 0); ALIGN's alpha = 10 as in the paper
OBJECTIVE_SETS = {
    "mlm": {"mlm": 1.0},
    "align": {"mlm": 1.0, "align": 10.0},
    "lexical": {"mlm": 1.0, "lexical": 1.0},
    "xlm": {"mlm": 1.0, "tlm": 1.0},  # MLM + TLM on the base/derived twins (below)
    "dict_mlm": {"dict_mlm": 1.0},  # replaces MLM; ALIGN-MLM's App. G.4 settings in the bench config
}
# XLM's TLM pairs: the derived corpus translates the base one line by line, so every base sentence has its twin
# (their share of a step: train.parallel_batch_size in the bench config)
BENCH_CONFIG = Path(__file__).resolve().parents[2] / "jobs" / "configs" / "bench_synthetic.yaml"
# `--preset NAME`: jobs/bench_presets/NAME.yaml, a bench's fields (BenchSpec) that become the command's defaults
PRESETS_DIR = BENCH_CONFIG.parents[1] / "bench_presets"

log = logging.getLogger("distalign")


@dataclass(kw_only=True)
class BenchSpec:
    # one sentence a line, or parsed sentences (.conllu); default: the English side of Tatoeba in the data home
    corpus: str = ""
    max_sentences: int = 20_000
    transformations: tuple[str, ...] = tuple(t for t in TRANSFORMATIONS if t not in NEEDS_PARSE)
    objectives: tuple[str, ...] = ("mlm", "align")
    # dictionary words (training + held out) as a share of the base corpus's word types: ALIGN-MLM's default
    # dictionary holds 25% of the natural language's vocabulary; entries are drawn from words seen min_count times
    dictionary_share: float = 0.25
    eval_words: int = 300  # dictionary words held out from training, for evaluation
    min_count: int = 3  # words rarer than this are never dictionary entries
    seed: int = 0
    output_dir: str = ""
    overrides: list[str] = field(default_factory=list)  # training-config overrides (train.max_steps=100)
    syntax_target: str = "fra"  # translit_syn: the target language (code or .conllu treebank; the paper: French)
    seeds: int = 1  # pre-training runs per cell, train.seed = train_seed, train_seed + 1, ... (the data keep `seed`)
    train_seed: int | None = None  # null: seed
    # xlm: TLM's distinct pairs as a share of the base corpus (objectives.tlm.parallel_share; ALIGN-MLM Table 1);
    # 0 = MLM alone, null = every base sentence's twin
    parallel_share: float | None = None
    # transfer: the base language's labelled data, <transfer_data>/<task>/<transfer_lang>/ (distalign transfer's
    # layout), carried into the derived language per transformation; no tasks = alignment only
    transfer_tasks: tuple[str, ...] = ()
    transfer_data: str = ""
    transfer_lang: LanguageCode = ""
    # > 0: the base corpus (max_sentences) and udpos + pawsx (this many examples per split) from a one-language
    # synthetic world of world_concepts concepts, generated with `seed` into <output_dir>/world
    world: int = 0
    world_concepts: int = 2000
    finetune_lr: float = (
        1e-3  # the synthetic world's fine-tuning settings (docs/guides/transfer.md, "the synthetic world's tasks")
    )
    finetune_epochs: int = 5
    # the share of the base corpus's word types the derived language keeps untransliterated (shared vocabulary, as
    # Deshpande et al. 2022 and ALIGN-MLM's App. D vary it): drawn from the words outside the dictionary
    shared_words: float = 0.0


def preset_names() -> list[str]:
    return sorted(path.stem for path in PRESETS_DIR.glob("*.yaml"))


def load_preset(name: str) -> BenchSpec:
    """The bench a preset names: ``jobs/bench_presets/<name>.yaml`` or a YAML file, its keys BenchSpec's fields."""
    from distalign.config import load_dataclass

    path = Path(name) if name.endswith((".yaml", ".yml")) else PRESETS_DIR / f"{name}.yaml"
    if not path.is_file():
        raise InputError(f"--preset {name}: no such preset ({', '.join(preset_names())}) or file")
    return load_dataclass(BenchSpec, path)


def cell_seeds(spec: BenchSpec) -> list[int]:
    first = spec.seed if spec.train_seed is None else spec.train_seed
    return list(range(first, first + spec.seeds))


def default_corpus_files() -> list[Path]:
    """The English side of every Tatoeba pair in the data home (`distalign data fetch tatoeba`)."""
    return sorted((eval_dir() / "tatoeba").glob("tatoeba.*-eng.eng"))


def base_sentences(spec: BenchSpec) -> list[str]:
    """Distinct normalised sentences of the base corpus, shuffled with the seed, at most ``max_sentences``."""
    files = [Path(spec.corpus)] if spec.corpus else default_corpus_files()
    if not files:
        raise not_fetched(
            "tatoeba",
            "no base corpus: pass --corpus FILE (one sentence a line); the default, the "
            f"English side of Tatoeba ({eval_dir() / 'tatoeba'}),",
        )
    sentences: dict[str, None] = {}
    for path in files:
        if not path.is_file():
            raise InputError(f"--corpus: file not found: {path}")
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.strip():
                sentences[normalise(line)] = None
    return seeded_sample(list(sentences), spec)


def seeded_sample(items: list, spec: BenchSpec) -> list:
    """``items`` (one per distinct sentence) shuffled with the bench's seed, at most ``max_sentences`` of them."""
    random.Random(spec.seed).shuffle(items)
    return items[: spec.max_sentences]


def base_corpus(spec: BenchSpec) -> tuple[list[str], list[str] | None]:
    """The base sentences (``base_sentences``) and, from a parsed corpus (``.conllu``), the same sentences in
    ``spec.syntax_target``'s word order (``distalign.synthetic_languages.syntax_transform``); None without parses."""
    if not spec.corpus.endswith(".conllu"):
        return base_sentences(spec), None
    trees: dict[str, list] = {}
    for tree in read_conllu(spec.corpus):
        trees.setdefault(normalise(" ".join(word.form for word in tree)), tree)
    ordered = seeded_sample(list(trees.items()), spec)
    reordered = syntax_transform([tree for _, tree in ordered], spec.syntax_target, spec.seed)
    return [text for text, _ in ordered], [normalise(" ".join(words)) for words in reordered]


def split_dictionary(sentences: list[str], spec: BenchSpec) -> tuple[list[str], list[str]]:
    """(training words, held-out evaluation words) drawn from the alphabetic word types of the corpus."""
    counts = Counter(w for s in sentences for w in s.split() if w.isalpha())
    types = sorted(w for w, c in counts.items() if c >= spec.min_count)
    size = round(spec.dictionary_share * len(counts))  # a share of the whole vocabulary, as the paper sizes it
    if size > len(types):
        raise InputError(
            f"--dictionary-share {spec.dictionary_share} of the {len(counts)} word types is {size} "
            f"words, but only {len(types)} are seen --min-count {spec.min_count} times or more"
        )
    rng = random.Random(spec.seed)
    entries = rng.sample(types, size)
    if len(entries) <= spec.eval_words:
        raise InputError(
            f"the dictionary has {len(entries)} words, not more than the {spec.eval_words} held out: "
            f"use a larger corpus, a larger --dictionary-share or fewer --eval-words"
        )
    return entries[spec.eval_words :], entries[: spec.eval_words]


def shared_words(sentences: list[str], spec: BenchSpec, dictionary: list[str]) -> frozenset[str]:
    """``spec.shared_words`` of the corpus's word types (every type, as the dictionary is sized), drawn with the
    seed from those outside the dictionary: the words the derived language spells as the base does."""
    types = sorted({w for s in sentences for w in s.split()} - set(dictionary))
    size = round(spec.shared_words * len({w for s in sentences for w in s.split()}))
    if size > len(types):
        raise InputError(
            f"--shared-words {spec.shared_words}: {size} words, but only {len(types)} word types are "
            "outside the dictionary (lower --shared-words or --dictionary-share)"
        )
    return frozenset(random.Random(spec.seed + 1).sample(types, size))


def write_language_pair(
    root: Path,
    transformation: str,
    sentences: list[str],
    translit: Transliteration,
    train_words: list[str],
    eval_words: list[str],
    seed: int,
    reordered: list[str] | None = None,
) -> dict[str, Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = {
        "base": root / f"corpus.{BASE_LANG}.txt",
        "derived": root / f"corpus.{DERIVED_LANG}.txt",
        "train_dict": root / "dictionary.train.tsv",
        "eval_dict": root / "dictionary.eval.tsv",
    }
    paths["base"].write_text("\n".join(sentences) + "\n", encoding="utf-8")
    derived = derive(sentences, transformation, translit, seed, reordered)
    paths["derived"].write_text("\n".join(derived) + "\n", encoding="utf-8")
    for key, words in (("train_dict", train_words), ("eval_dict", eval_words)):
        paths[key].write_text("".join(f"{w}\t{translit.word(w)}\n" for w in words), encoding="utf-8")
    return paths


def training_config(
    spec: BenchSpec,
    transformation: str,
    objective: str,
    paths: dict[str, Path],
    out_dir: Path,
    parent_run_id: str = "",
    seed: int | None = None,
):
    weights = dict(OBJECTIVE_SETS[objective])
    share = (
        []
        if spec.parallel_share is None or "tlm" not in weights
        else [f"objectives.tlm.parallel_share={spec.parallel_share}"]
        if spec.parallel_share > 0
        else []
    )
    if spec.parallel_share == 0:  # no parallel data: XLM is MLM alone (ALIGN-MLM Table 1's 0 % row)
        weights.pop("tlm", None)
    seed = cell_seeds(spec)[0] if seed is None else seed
    corpora = [{"path": str(paths["base"]), "lang": BASE_LANG}, {"path": str(paths["derived"]), "lang": DERIVED_LANG}]
    dictionary = {"lang1": BASE_LANG, "lang2": DERIVED_LANG}
    parallel = {**dictionary, "path1": str(paths["base"]), "path2": str(paths["derived"])}
    return load_config(
        BENCH_CONFIG,
        [
            f"run.name=bench-{transformation}-{objective}" + (f"-seed{seed}" if seed != spec.seed else ""),
            f"storage.path={out_dir / 'runs'}",
            f'tracking.parent_run_id="{parent_run_id}"',
            f"train.seed={seed}",
            *(
                f"objectives.{name}.weight={weights.get(name, 0.0)}"
                for name in ("mlm", "lexical", "align", "tlm", "dict_mlm")
            ),
            # JSON is valid YAML: paths with any character survive the override syntax
            "data.corpora=" + json.dumps(corpora),
            "data.dictionaries=" + json.dumps([{**dictionary, "path": str(paths["train_dict"])}]),
            "data.eval_dictionaries=" + json.dumps([{**dictionary, "path": str(paths["eval_dict"])}]),
            "data.parallel=" + json.dumps([parallel]),
            *share,
            *spec.overrides,
        ],
    )


# ALIGN-MLM's Table 8 (alignment %, the paper's transformations): ours maps translit -> Trans, translit_inv ->
# Trans + Inv, translit_syn -> Trans + Syn; the paper has no permutation.
PAPER_TABLE8 = {
    ("translit", "mlm"): 90.0,
    ("translit_inv", "mlm"): 0.3,
    ("translit_syn", "mlm"): 57.3,
    ("translit", "align"): 98.4,
    ("translit_inv", "align"): 95.2,
    ("translit_syn", "align"): 98.2,
    ("translit", "xlm"): 97.7,
    ("translit_inv", "xlm"): 85.6,
    ("translit_syn", "xlm"): 98.6,
    ("translit", "dict_mlm"): 95.7,
    ("translit_inv", "dict_mlm"): 64.2,
    ("translit_syn", "dict_mlm"): 93.7,
}


# the issue's reading of Table 8's pattern at bench scale: MLM aligns plain transliteration (paper 90.0) and stays
# near chance under inversion (paper 0.3); chance is ~0.05 % (1 in the derived vocabulary)
MLM_ALIGNS, MLM_NEAR_CHANCE = 50.0, 5.0


def alignment_checks(cells: pd.DataFrame) -> list[tuple[str, bool]]:
    """Table 8's findings as (claim, holds) on the cells' mean alignment: MLM on translit ≥ MLM_ALIGNS, MLM on
    translit_inv ≤ MLM_NEAR_CHANCE, ALIGN ≥ MLM on every transformation. Claims whose cells were not run are left
    out."""
    mean = {(r.transformation, r.objective): r.alignment for r in cells.itertuples()}
    checks = []
    if ("translit", "mlm") in mean:
        value = mean["translit", "mlm"]
        checks.append((f"MLM on translit aligns: {value:.1f} ≥ {MLM_ALIGNS:.0f} (paper 90.0)", value >= MLM_ALIGNS))
    if ("translit_inv", "mlm") in mean:
        value = mean["translit_inv", "mlm"]
        checks.append(
            (
                f"MLM on translit_inv stays near chance: {value:.1f} ≤ {MLM_NEAR_CHANCE:.0f} (paper 0.3)",
                value <= MLM_NEAR_CHANCE,
            )
        )
    for t in dict.fromkeys(cells["transformation"]):
        if (t, "align") in mean and (t, "mlm") in mean:
            a, m = mean[t, "align"], mean[t, "mlm"]
            checks.append((f"{t}: ALIGN {a:.1f} ≥ MLM {m:.1f}", a >= m))
    return checks


def vocabulary_counterparts(
    vocab: dict[str, int], translit: Transliteration, specials: Iterable[str] = ()
) -> tuple[list[int], list[int], list[int], int]:
    """Token ids of the base language's vocabulary with their transliterated counterparts, the derived
    language's whole vocabulary, and how many base tokens have no counterpart in the vocabulary.

    Base tokens are those spelt only in the base alphabet, derived tokens only in the transliterated
    one (the word-start marker and other shared symbols aside; ``specials``, such as "<s>", are
    neither); a counterpart is the same token with every character transliterated."""

    def letters(token: str) -> set[str]:  # every transliterated character is alphanumeric (derived_letters)
        return {c for c in token if c.isalnum() or c in translit.table}

    source, derived, specials = set(translit.table), set(translit.table.values()), set(specials)
    base = [t for t in vocab if t not in specials and letters(t) and letters(t) <= source]
    candidates = [vocab[t] for t in vocab if t not in specials and letters(t) and letters(t) <= derived]
    counterparts = {t: "".join(translit.table.get(c, c) for c in t) for t in base}
    paired = [(vocab[t], vocab[c]) for t, c in counterparts.items() if c in vocab]
    return [a for a, _ in paired], [b for _, b in paired], candidates, len(base) - len(paired)


def evaluate_run(model_dir: str, eval_words: list[str], derived_vocab: list[str], translit: Transliteration) -> dict:
    """ALIGN-MLM's alignment (input embeddings, whole vocabularies); the contextual word alignment of the
    held-out words at the embedding layer and its best layer; BLI MRR at its best layer."""
    from distalign.eval.alignment import vocabulary_alignment
    from distalign.eval.local_evaluation import evaluate_locally
    from distalign.eval.tasks import BLITask, WordAlignmentTask
    from distalign.models.adapters import load_masked_lm_with_adapters
    from distalign.models.encoder import Encoder
    from distalign.models.loading import load_tokenizer

    pairs = [(w, translit.word(w)) for w in eval_words]
    masked_lm, tokenizer = load_masked_lm_with_adapters(model_dir), load_tokenizer(model_dir)
    src, tgt, candidates, unpaired = vocabulary_counterparts(
        tokenizer.get_vocab(), translit, tokenizer.all_special_tokens
    )
    with torch.no_grad():
        alignment = vocabulary_alignment(masked_lm.get_input_embeddings().weight, src, tgt, candidates)
    rows = pd.DataFrame(
        evaluate_locally(
            Encoder(masked_lm),
            tokenizer,
            [
                WordAlignmentTask(BASE_LANG, DERIVED_LANG, pairs),
                BLITask.from_pairs(BASE_LANG, DERIVED_LANG, pairs, derived_vocab, lowercase=False),
            ],
        )
    )
    words = rows[rows["task"] == "word_alignment"].set_index("layer")["value"]
    mrr = rows[(rows["task"] == "bli") & (rows["metric"] == "mrr")].set_index("layer")["value"]
    return {
        "alignment": alignment,
        "alignment_tokens": len(src),
        "alignment_unpaired": unpaired,
        "word_alignment_emb": words.loc[0],
        "word_alignment_best": words.max(),
        "word_alignment_best_layer": int(words.idxmax()),
        "bli_mrr_best": mrr.max(),
        "bli_best_layer": int(mrr.idxmax()),
    }


def paper_table8(r) -> str:
    value = PAPER_TABLE8.get((r.transformation, r.objective))
    return "–" if value is None else f"{value:.1f}"


def markdown_table(results: pd.DataFrame) -> str:
    """One row per training run (cell and seed)."""
    header = (
        "| transformation | objective | seed | alignment (ALIGN-MLM's) | paper, Table 8 | word alignment, "
        "embeddings | word alignment, best layer | BLI MRR, best layer |\n|---|---|---|---|---|---|---|---|\n"
    )
    return header + "".join(
        f"| {r.transformation} | {r.objective} | {r.seed} | {r.alignment:.1f} | {paper_table8(r)} "
        f"| {r.word_alignment_emb:.1f} | {r.word_alignment_best:.1f} (layer {r.word_alignment_best_layer}) "
        f"| {r.bli_mrr_best:.3f} (layer {r.bli_best_layer}) |\n"
        for r in results.itertuples()
    )


ALIGNMENT_COLUMNS = ["alignment", "word_alignment_best", "bli_mrr_best"]


def alignment_means_markdown(cells: pd.DataFrame) -> str:
    """Table 8 per cell (``cell_means`` of ALIGNMENT_COLUMNS: mean ± std over its seeds) and its checks."""
    header = (
        "| transformation | objective | seeds | alignment | paper, Table 8 | word alignment, best layer "
        "| BLI MRR, best layer |\n|---|---|---|---|---|---|---|\n"
    )
    return (
        header
        + "".join(
            f"| {r.transformation} | {r.objective} | {r.seeds} | {spread(r.alignment, r.alignment_std, r.seeds)} "
            f"| {paper_table8(r)} | {spread(r.word_alignment_best, r.word_alignment_best_std, r.seeds)} "
            f"| {spread(r.bli_mrr_best, r.bli_mrr_best_std, r.seeds, 3)} |\n"
            for r in cells.itertuples()
        )
        + "\n"
        + checks_markdown("ALIGN-MLM's Table 8 pattern", alignment_checks(cells))
        + "\n"
    )


def check_runs(spec: BenchSpec, runs: list[tuple[str, str]], data: dict[str, dict[str, Path]], out_dir: Path):
    """Every run's configuration and inputs read and checked before Ray starts (a bad override, a dictionary
    too small for a batch); returns the first run's configuration. The runs share one cached tiny model."""
    from distalign.preparation.inputs import prepare_data

    configs = []
    for transformation, objective in runs:
        config = training_config(spec, transformation, objective, data[transformation], out_dir)
        try:
            prepare_data(config)
        except ValueError as error:
            raise InputError(
                f"run {transformation} / {objective}: {error} (the dictionary has "
                f"{spec.dictionary_share:.0%} of the word types, {spec.eval_words} held out: see "
                "--dictionary-share, --eval-words, and training overrides)"
            ) from None
        configs.append(config)
    return configs[0]


@dataclass(kw_only=True)
class PreparedBench:
    """What every cell of a bench reads, written and checked on the driver before Ray starts."""

    spec: BenchSpec
    out_dir: Path
    translit: Transliteration
    eval_words: list[str]
    data: dict[str, dict[str, Path]]  # transformation -> its language pair's files
    tasks: dict[str, Path]  # transformation -> its transfer data (distalign transfer's --data-dir); none: no transfer
    params: dict
    probe: object  # the first run's training config (tracking settings)

    def cells(self) -> list[tuple[str, str, int]]:
        return [
            (t, o, seed)
            for t in self.spec.transformations
            for o in self.spec.objectives
            for seed in cell_seeds(self.spec)
        ]


def with_world(spec: BenchSpec, out_dir: Path) -> BenchSpec:
    """``spec`` with its base corpus and transfer tasks from a one-language synthetic world (``spec.world``)."""
    from distalign.data.synthetic import SyntheticConfig, generate_world

    parsed = bool(NEEDS_PARSE & set(spec.transformations))  # the grammar's trees (same sentences) for translit_syn
    world = generate_world(
        SyntheticConfig(
            languages=["xa"],
            num_concepts=spec.world_concepts,
            sentences_per_language=spec.max_sentences,
            transfer_examples=spec.world,
            parsed_corpora=parsed,
        ),
        out_dir / "world",
        spec.seed,
    )
    corpus = world.parsed_corpora["xa"] if parsed else world.corpora["xa"]
    return replace(
        spec,
        corpus=str(corpus),
        transfer_data=str(world.transfer_tasks),
        transfer_lang="xa",
        transfer_tasks=spec.transfer_tasks or ("udpos", "pawsx"),
    )


def prepare_bench(spec: BenchSpec) -> PreparedBench:
    from distalign.synthetic_languages.derived_tasks import (
        check_tasks,
        example_texts,
        read_examples,
        write_derived_tasks,
    )

    unknown = set(spec.objectives) - set(OBJECTIVE_SETS) | set(spec.transformations) - set(TRANSFORMATIONS)
    if unknown:
        raise InputError(
            f"unknown objective set or transformation: {sorted(unknown)} (objectives: "
            f"{', '.join(OBJECTIVE_SETS)}; transformations: {', '.join(TRANSFORMATIONS)})"
        )
    if NEEDS_PARSE & set(spec.transformations) and not (spec.world or spec.corpus.endswith(".conllu")):
        raise InputError(
            f"--transformations {','.join(sorted(NEEDS_PARSE & set(spec.transformations)))} re-orders "
            "sentences by their dependency parses: pass --corpus FILE.conllu (CoNLL-U, as Stanza, "
            "UDPipe or spaCy write it), or --world N (the synthetic grammar's trees)"
        )
    if NEEDS_PARSE & set(spec.transformations):  # before the world, the corpus and any training
        spec = replace(spec, syntax_target=checked_target(spec.syntax_target, "syntax_target (--syntax-target)"))
    if (
        spec.seeds < 1
        or (spec.parallel_share is not None and not 0 <= spec.parallel_share <= 1)
        or not 0 <= spec.shared_words < 1
    ):
        raise InputError("--seeds must be >= 1, --parallel-share in [0, 1] and --shared-words in [0, 1)")
    out_dir = Path(spec.output_dir or distalign_home() / "bench_synthetic").resolve()
    if spec.world:
        spec = with_world(spec, out_dir)
    check_tasks(spec.transfer_tasks, spec.transformations)
    if spec.transfer_tasks and not (spec.transfer_data and spec.transfer_lang):
        raise InputError(
            "--transfer-tasks: give --transfer-data DIR and --transfer-lang LANG (the base language's "
            "labelled data, <DIR>/<task>/<LANG>/), or --world N"
        )
    examples = read_examples(spec.transfer_data, spec.transfer_lang, spec.transfer_tasks) if spec.transfer_tasks else {}
    sentences, reordered = base_corpus(spec)
    translit = Transliteration.for_text(sentences + example_texts(examples))
    train_words, eval_words = split_dictionary(sentences, spec)
    translit = replace(translit, kept=shared_words(sentences, spec, train_words + eval_words))
    params = {
        "corpus": spec.corpus or "tatoeba English",
        "sentences": len(sentences),
        "dictionary_share": spec.dictionary_share,
        "eval_words": spec.eval_words,
        "overrides": " ".join(spec.overrides),
        "seeds": spec.seeds,
        "parallel_share": spec.parallel_share,
        "transfer_tasks": ",".join(spec.transfer_tasks),
        "shared_words": spec.shared_words,
    }
    log.info(
        "bench: %d base sentences; dictionary %d training words, %d held out; transformations %s, "
        "objectives %s, %d seed(s); transfer tasks %s",
        len(sentences),
        len(train_words),
        len(eval_words),
        list(spec.transformations),
        list(spec.objectives),
        spec.seeds,
        list(spec.transfer_tasks) or "none",
    )
    data = {
        t: write_language_pair(
            out_dir / "data" / t, t, sentences, translit, train_words, eval_words, spec.seed, reordered
        )
        for t in spec.transformations
    }
    tasks = (
        {
            t: write_derived_tasks(
                examples,
                spec.transfer_data,
                spec.transfer_lang,
                t,
                translit,
                spec.seed,
                out_dir / "data" / t / "transfer",
                BASE_LANG,
                DERIVED_LANG,
                spec.syntax_target,
            )
            for t in spec.transformations
        }
        if examples
        else {}
    )
    probe = check_runs(spec, [(t, o) for t in spec.transformations for o in spec.objectives], data, out_dir)
    return PreparedBench(
        spec=spec,
        out_dir=out_dir,
        translit=translit,
        eval_words=eval_words,
        data=data,
        tasks=tasks,
        params=params,
        probe=probe,
    )


def measure_transfer(bench: PreparedBench, model_dir: str, transformation: str, objective: str, seed: int) -> dict:
    """Fine-tune ``model_dir`` on the base language's tasks, test on the derived language's (``distalign.transfer``,
    in this Ray session, one fine-tuning seed: the cell's)."""
    from distalign.synthetic_languages.transfer_study import labels_used, transfer_scores
    from distalign.transfer.zero_shot import FineTuneOverrides, TransferSpec, predictions_folder, run_transfer

    spec = bench.spec
    transfer = TransferSpec(
        model=model_dir,
        tasks=spec.transfer_tasks,
        data_dir=str(bench.tasks[transformation]),
        source=BASE_LANG,
        languages=(DERIVED_LANG,),
        seeds=1,
        seed=seed,
        cpus_per_worker=0.5,
        finetune=FineTuneOverrides(lr=spec.finetune_lr, epochs=spec.finetune_epochs, select_every=0),
        output_dir=str(bench.out_dir / "transfer" / f"{transformation}-{objective}-seed{seed}"),
    )
    transfer.tracking.enabled = False  # the cell's numbers go to its training run (run_cell)
    summary, _ = run_transfer(transfer, progress=log.info)
    used = {
        task: labels_used(predictions_folder(Path(transfer.output_dir), task, seed) / f"{BASE_LANG}.jsonl")
        for task in spec.transfer_tasks
    }
    return transfer_scores(summary, BASE_LANG, DERIVED_LANG) | {
        f"labels_{kind}_{task}": count for task, counts in used.items() for kind, count in counts.items()
    }


def run_cell(bench: PreparedBench, transformation: str, objective: str, seed: int, parent_id: str) -> dict:
    """One cell: pre-train, score the alignment, and (with tasks) the transfer; logged to the training run."""
    from distalign.tracking import MetricLogger
    from distalign.train.trainer import run_training

    log.info("bench: training %s / %s, seed %d", transformation, objective, seed)
    paths = bench.data[transformation]
    config = training_config(bench.spec, transformation, objective, paths, bench.out_dir, parent_id, seed)
    outcome = run_training(config)
    model_dir = str(Path(outcome.checkpoint) / MODEL_DIR)
    derived_vocab = sorted(set(paths["derived"].read_text(encoding="utf-8").split()))
    scores = evaluate_run(model_dir, bench.eval_words, derived_vocab, bench.translit)
    if bench.tasks:
        scores |= measure_transfer(bench, model_dir, transformation, objective, seed)
    logger = MetricLogger(config.tracking.uri, outcome.run_id)
    logger.log({f"bench/{k}": float(v) for k, v in scores.items()}, config.train.max_steps)
    logger.close()
    log.info(
        "bench: %s / %s, seed %d: alignment %.1f (%d tokens), BLI MRR %.3f%s",
        transformation,
        objective,
        seed,
        scores["alignment"],
        scores["alignment_tokens"],
        scores["bli_mrr_best"],
        "".join(f", {k} {v:.1f}" for k, v in scores.items() if k.startswith("delta_")),
    )
    return {"transformation": transformation, "objective": objective, "seed": seed, **scores}


def cell_key(bench: PreparedBench, transformation: str, objective: str, seed: int) -> str:
    """A digest of everything a cell's scores depend on (the MLflow parent run aside)."""
    config = training_config(
        bench.spec, transformation, objective, bench.data[transformation], bench.out_dir, seed=seed
    ).to_dict()
    config.pop("tracking")
    folders = [bench.tasks[transformation]] if bench.tasks else []
    files = sorted([*bench.data[transformation].values(), *(f for d in folders for f in d.rglob("*") if f.is_file())])
    spec = bench.spec
    inputs = {
        "config": config,
        "eval_words": bench.eval_words,
        "tasks": list(spec.transfer_tasks),
        "finetune": [spec.finetune_lr, spec.finetune_epochs],
        "files": {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files},
    }
    return content_key(inputs)


def run_cells(bench: PreparedBench, parent_id: str) -> list[dict]:
    """Every cell's scores: run (``run_cell``) and kept in ``<output_dir>/cells/``, or reused from there when an
    earlier bench ran it with the same key (``cell_key``)."""
    results = []
    for transformation, objective, seed in bench.cells():
        path = bench.out_dir / "cells" / f"{transformation}-{objective}-seed{seed}.json"
        key = cell_key(bench, transformation, objective, seed)
        kept = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        if kept.get("key") == key:
            log.info("bench: %s / %s, seed %d: finished earlier (%s), reused", transformation, objective, seed, path)
            results.append(kept["scores"])
            continue
        scores = run_cell(bench, transformation, objective, seed, parent_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"key": key, "scores": scores}, default=float), encoding="utf-8")
        results.append(scores)
    return results


def report(bench: PreparedBench, results: list[dict], parent_id: str) -> str:
    """The tables (printed, files, MLflow artifacts of the parent run): Table 8 per run, then per cell (mean ± std
    over the seeds) with its checks; with transfer, Table 3, ρ, the checks and the Figure 3 scatter."""
    from distalign.synthetic_languages import transfer_study
    from distalign.tracking import MetricLogger, client_for

    out_dir, uri = bench.out_dir, bench.probe.tracking.uri
    table = pd.DataFrame(results)
    cells = cell_means(table, ALIGNMENT_COLUMNS)
    table8 = alignment_checks(cells)
    text = markdown_table(table) + "\n" + alignment_means_markdown(cells)
    files = ["results.md", "results.csv"]
    table.to_csv(out_dir / "results.csv", index=False)
    metrics = {
        f"bench/{r.transformation}/{r.objective}/{k}{suffix}": float(getattr(r, k + suffix))
        for r in cells.itertuples()
        for k in ALIGNMENT_COLUMNS
        for suffix in ("", "_std")
    }
    metrics["bench/table8_pattern_holds"] = transfer_study.all_hold(table8)
    if bench.tasks:
        tasks = list(bench.spec.transfer_tasks)
        columns = ["alignment"] + [f"{kind}_{task}" for task in tasks for kind in ("source", "target", "delta")]
        cells = transfer_study.cell_means(table, columns)
        rho = transfer_study.correlations(cells, tasks)
        checks = transfer_study.shape_checks(cells, tasks, rho) + transfer_study.shortcut_checks(table, tasks)
        text += "\n" + transfer_study.markdown(cells, tasks, rho, checks)
        cells.to_csv(out_dir / "transfer.csv", index=False)
        transfer_study.scatter(cells, tasks, rho, out_dir / "alignment_vs_transfer.png")
        files += ["transfer.csv", "alignment_vs_transfer.png"]
        metrics |= {f"bench/spearman/{task}": value for task, (value, _) in rho.items()}
        metrics |= {f"bench/spearman_p/{task}": p for task, (_, p) in rho.items()}
        metrics["bench/shape_holds"] = transfer_study.all_hold(checks)
    (out_dir / "results.md").write_text(text, encoding="utf-8")
    client = client_for(uri)
    for name in files:
        client.log_artifact(parent_id, str(out_dir / name))
    logger = MetricLogger(uri, parent_id)
    logger.log({k: v for k, v in metrics.items() if v == v}, 0)  # NaN: too few cells for ρ
    logger.close()
    return text


def run_bench(spec: BenchSpec) -> pd.DataFrame:
    from distalign.ray_session import ensure_ray
    from distalign.tracking import tracked_run

    bench = prepare_bench(spec)
    ensure_ray()
    with tracked_run(
        bench.probe.tracking.uri,
        bench.probe.tracking.experiment,
        "bench-synthetic",
        str(bench.out_dir),
        bench.params,
        {k: list(v) if isinstance(v, tuple) else v for k, v in vars(spec).items()},
    ) as parent_id:
        results = run_cells(bench, parent_id)
        text = report(bench, results, parent_id)
    print("\n" + text, flush=True)
    return pd.DataFrame(results)
