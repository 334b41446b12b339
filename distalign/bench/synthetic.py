"""``distalign bench synthetic``: does an alignment objective align a language with a transformed copy of itself?

For each transformation of the base corpus (``distalign.bench.derived_language``) and each
objective set, a small model is trained from scratch on both languages; then we report the alignment
score (ALIGN-MLM's: the share, in %, of the base language's vocabulary tokens whose transliterated twin,
a token too, is their nearest input embedding by cosine among the derived language's whole vocabulary;
no mapping) and, on dictionary words held out from training, word alignment and BLI MRR against the
whole derived vocabulary. Words are encoded alone; layer 0 is the embedding output, where ALIGN-MLM acts.

Everything lands in one MLflow parent run (a child run per training run) with the markdown
table as an artifact; the table is also printed.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from distalign.bench.derived_language import NEEDS_PARSE, TRANSFORMATIONS, Transliteration, derive, normalise
from distalign.bench.syntax_transform import read_conllu, syntax_transform
from distalign.checkpoint import MODEL_DIR
from distalign.config import distalign_home, load_config
from distalign.data.readers import InputError

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

log = logging.getLogger("distalign")


@dataclass
class BenchSpec:
    # one sentence a line, or parsed sentences (.conllu); default: the English side of ../shared/data/eval/tatoeba
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


def default_corpus_files() -> list[Path]:
    folder = Path.cwd().parent / "shared" / "data" / "eval" / "tatoeba"
    return sorted(folder.glob("tatoeba.*-eng.eng"))


def base_sentences(spec: BenchSpec) -> list[str]:
    """Distinct normalised sentences of the base corpus, shuffled with the seed, at most ``max_sentences``."""
    files = [Path(spec.corpus)] if spec.corpus else default_corpus_files()
    if not files:
        raise InputError("no base corpus: pass --corpus FILE (one sentence a line); the default, the English "
                         "side of ../shared/data/eval/tatoeba, is not there")
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
    return items[:spec.max_sentences]


def base_corpus(spec: BenchSpec) -> tuple[list[str], list[str] | None]:
    """The base sentences (``base_sentences``) and, from a parsed corpus (``.conllu``), the same sentences in
    ``spec.syntax_target``'s word order (``distalign.bench.syntax_transform``); None without parses."""
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
        raise InputError(f"--dictionary-share {spec.dictionary_share} of the {len(counts)} word types is {size} "
                         f"words, but only {len(types)} are seen --min-count {spec.min_count} times or more")
    rng = random.Random(spec.seed)
    entries = rng.sample(types, size)
    if len(entries) <= spec.eval_words:
        raise InputError(f"the dictionary has {len(entries)} words, not more than the {spec.eval_words} held out: "
                         f"use a larger corpus, a larger --dictionary-share or fewer --eval-words")
    return entries[spec.eval_words:], entries[:spec.eval_words]


def write_language_pair(root: Path, transformation: str, sentences: list[str], translit: Transliteration,
                        train_words: list[str], eval_words: list[str], seed: int,
                        reordered: list[str] | None = None) -> dict[str, Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = {"base": root / f"corpus.{BASE_LANG}.txt", "derived": root / f"corpus.{DERIVED_LANG}.txt",
             "train_dict": root / "dictionary.train.tsv", "eval_dict": root / "dictionary.eval.tsv"}
    paths["base"].write_text("\n".join(sentences) + "\n", encoding="utf-8")
    derived = derive(sentences, transformation, translit, seed, reordered)
    paths["derived"].write_text("\n".join(derived) + "\n", encoding="utf-8")
    for key, words in (("train_dict", train_words), ("eval_dict", eval_words)):
        paths[key].write_text("".join(f"{w}\t{translit.word(w)}\n" for w in words), encoding="utf-8")
    return paths


def training_config(spec: BenchSpec, transformation: str, objective: str, paths: dict[str, Path],
                    out_dir: Path, parent_run_id: str = ""):
    weights = OBJECTIVE_SETS[objective]
    corpora = [{"path": str(paths["base"]), "lang": BASE_LANG}, {"path": str(paths["derived"]), "lang": DERIVED_LANG}]
    dictionary = {"lang1": BASE_LANG, "lang2": DERIVED_LANG}
    parallel = {**dictionary, "path1": str(paths["base"]), "path2": str(paths["derived"])}
    return load_config(BENCH_CONFIG, [
        f"run.name=bench-{transformation}-{objective}",
        f"storage.path={out_dir / 'runs'}",
        f"tracking.parent_run_id=\"{parent_run_id}\"",
        f"train.seed={spec.seed}",
        *(f"objectives.{name}.weight={weights.get(name, 0.0)}" for name in ("mlm", "lexical", "align", "tlm",
                                                                            "dict_mlm")),
        # JSON is valid YAML: paths with any character survive the override syntax
        "data.corpora=" + json.dumps(corpora),
        "data.dictionaries=" + json.dumps([{**dictionary, "path": str(paths["train_dict"])}]),
        "data.eval_dictionaries=" + json.dumps([{**dictionary, "path": str(paths["eval_dict"])}]),
        "data.parallel=" + json.dumps([parallel]),
        *spec.overrides,
    ])


# ALIGN-MLM's Table 8 (alignment %, the paper's transformations): ours maps translit -> Trans, translit_inv ->
# Trans + Inv, translit_syn -> Trans + Syn; the paper has no permutation.
PAPER_TABLE8 = {("translit", "mlm"): 90.0, ("translit_inv", "mlm"): 0.3, ("translit_syn", "mlm"): 57.3,
                ("translit", "align"): 98.4, ("translit_inv", "align"): 95.2, ("translit_syn", "align"): 98.2,
                ("translit", "xlm"): 97.7, ("translit_inv", "xlm"): 85.6, ("translit_syn", "xlm"): 98.6,
                ("translit", "dict_mlm"): 95.7, ("translit_inv", "dict_mlm"): 64.2, ("translit_syn", "dict_mlm"): 93.7}


def vocabulary_counterparts(vocab: dict[str, int], translit: Transliteration, specials: Iterable[str] = ()
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
    from distalign.eval.tasks import BLITask, WordAlignmentTask, evaluate_locally
    from distalign.models.adapters import load_masked_lm_with_adapters
    from distalign.models.encoder import Encoder
    from distalign.models.loading import load_tokenizer

    pairs = [(w, translit.word(w)) for w in eval_words]
    masked_lm, tokenizer = load_masked_lm_with_adapters(model_dir), load_tokenizer(model_dir)
    src, tgt, candidates, unpaired = vocabulary_counterparts(tokenizer.get_vocab(), translit,
                                                             tokenizer.all_special_tokens)
    with torch.no_grad():
        alignment = vocabulary_alignment(masked_lm.get_input_embeddings().weight, src, tgt, candidates)
    rows = pd.DataFrame(evaluate_locally(Encoder(masked_lm), tokenizer, [
        WordAlignmentTask(BASE_LANG, DERIVED_LANG, pairs),
        BLITask.from_pairs(BASE_LANG, DERIVED_LANG, pairs, derived_vocab, lowercase=False),
    ]))
    words = rows[rows["task"] == "word_alignment"].set_index("layer")["value"]
    mrr = rows[(rows["task"] == "bli") & (rows["metric"] == "mrr")].set_index("layer")["value"]
    return {"alignment": alignment, "alignment_tokens": len(src), "alignment_unpaired": unpaired,
            "word_alignment_emb": words.loc[0], "word_alignment_best": words.max(),
            "word_alignment_best_layer": int(words.idxmax()), "bli_mrr_best": mrr.max(),
            "bli_best_layer": int(mrr.idxmax())}


def markdown_table(results: pd.DataFrame) -> str:
    header = ("| transformation | objective | alignment (ALIGN-MLM's) | paper, Table 8 | word alignment, embeddings "
              "| word alignment, best layer | BLI MRR, best layer |\n|---|---|---|---|---|---|---|\n")
    def paper(r) -> str:
        value = PAPER_TABLE8.get((r.transformation, r.objective))
        return "–" if value is None else f"{value:.1f}"
    return header + "".join(
        f"| {r.transformation} | {r.objective} | {r.alignment:.1f} | {paper(r)} | {r.word_alignment_emb:.1f} "
        f"| {r.word_alignment_best:.1f} (layer {r.word_alignment_best_layer}) | {r.bli_mrr_best:.3f} "
        f"(layer {r.bli_best_layer}) |\n"
        for r in results.itertuples())


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
            raise InputError(f"run {transformation} / {objective}: {error} (the dictionary has "
                             f"{spec.dictionary_share:.0%} of the word types, {spec.eval_words} held out: see "
                             "--dictionary-share, --eval-words, and training overrides)") from None
        configs.append(config)
    return configs[0]


def run_bench(spec: BenchSpec) -> pd.DataFrame:
    from distalign.ray_session import ensure_ray
    from distalign.tracking import MetricLogger, client_for, tracked_run
    from distalign.train.trainer import run_training

    unknown = set(spec.objectives) - set(OBJECTIVE_SETS) | set(spec.transformations) - set(TRANSFORMATIONS)
    if unknown:
        raise InputError(f"unknown objective set or transformation: {sorted(unknown)} (objectives: "
                         f"{', '.join(OBJECTIVE_SETS)}; transformations: {', '.join(TRANSFORMATIONS)})")
    if NEEDS_PARSE & set(spec.transformations) and not spec.corpus.endswith(".conllu"):
        raise InputError(f"--transformations {','.join(sorted(NEEDS_PARSE & set(spec.transformations)))} re-orders "
                         "sentences by their dependency parses: pass --corpus FILE.conllu (CoNLL-U, as Stanza, "
                         "UDPipe or spaCy write it)")
    out_dir = Path(spec.output_dir or distalign_home() / "bench_synthetic").resolve()
    sentences, reordered = base_corpus(spec)
    translit = Transliteration.for_text(sentences)
    train_words, eval_words = split_dictionary(sentences, spec)
    params = {"corpus": spec.corpus or "tatoeba English", "sentences": len(sentences),
              "dictionary_share": spec.dictionary_share, "eval_words": spec.eval_words,
              "overrides": " ".join(spec.overrides)}
    log.info("bench: %d base sentences; dictionary %d training words, %d held out; transformations %s, "
             "objectives %s", len(sentences), len(train_words), len(eval_words), list(spec.transformations),
             list(spec.objectives))
    data = {t: write_language_pair(out_dir / "data" / t, t, sentences, translit, train_words, eval_words, spec.seed,
                                   reordered) for t in spec.transformations}
    runs = [(t, o) for t in spec.transformations for o in spec.objectives]
    probe = check_runs(spec, runs, data, out_dir)
    ensure_ray()
    results = []
    with tracked_run(probe.tracking.uri, probe.tracking.experiment, "bench-synthetic", str(out_dir), params,
                     {k: list(v) if isinstance(v, tuple) else v for k, v in vars(spec).items()}) as parent_id:
        for transformation, objective in runs:
            log.info("bench: training %s / %s", transformation, objective)
            paths = data[transformation]
            config = training_config(spec, transformation, objective, paths, out_dir, parent_id)
            outcome = run_training(config)
            derived_vocab = sorted(set(paths["derived"].read_text(encoding="utf-8").split()))
            scores = evaluate_run(str(Path(outcome.checkpoint) / MODEL_DIR), eval_words, derived_vocab, translit)
            MetricLogger(config.tracking.uri, outcome.run_id).log(
                {f"bench/{k}": float(v) for k, v in scores.items()}, config.train.max_steps)
            results.append({"transformation": transformation, "objective": objective, **scores})
            log.info("bench: %s / %s: alignment %.1f (%d tokens), BLI MRR %.3f", transformation, objective,
                     scores["alignment"], scores["alignment_tokens"], scores["bli_mrr_best"])
        table = pd.DataFrame(results)
        text = markdown_table(table)
        (out_dir / "results.md").write_text(text, encoding="utf-8")
        table.to_csv(out_dir / "results.csv", index=False)
        client = client_for(probe.tracking.uri)
        for name in ("results.md", "results.csv"):
            client.log_artifact(parent_id, str(out_dir / name))
        MetricLogger(probe.tracking.uri, parent_id).log(
            {f"bench/{r['transformation']}/{r['objective']}/{k}": float(r[k])
             for r in results for k in ("alignment", "word_alignment_best", "bli_mrr_best")}, 0)
    print("\n" + text, flush=True)
    return table
