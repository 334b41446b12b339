"""Every evaluation resource distalign reads, by name: where each file comes from and where it lives.

A resource is a set of files in one upstream GitHub repository, pinned to a commit; each file (``catalog.tsv``, one
row a file) has its upstream path, its SHA-256 and size, and its place in the data home, which is exactly the
layout the readers expect (``distalign.eval.benchmarks`` under ``eval/``, ``distalign.data.omw`` under
``lexicons/omw``). A file's ``part`` (a language pair, a language, a wordnet) lets ``distalign data fetch
g-bli:de-en,en-fi`` take a few.

The hashes were computed from the upstream repositories at the pinned commits; every file also held in the
project's reference copy was checked byte for byte against it (all of G-BLI, the vocabularies, Multi-SimLex,
Tatoeba and the wordnets). PanLex-BLI's were computed from the upstream snapshot alone.

Read by the evaluation code but not catalogued (``MANUAL``): SemEval-2017 Task 2 (``benchmarks.read_semeval2017``),
whose upstream is a zip archive on alt.qcri.org; no public GitHub repository holding its files was found to pin
(2026-11-28), so ``data fetch semeval17`` says where to download and unpack it, and fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from distalign.errors import InputError

UPSTREAM_ROOT = "https://raw.githubusercontent.com"  # what a mirror base URL replaces
CATALOG_FILE = Path(__file__).with_name("catalog.tsv")


@dataclass(frozen=True, kw_only=True)
class Resource:
    name: str  # what `distalign data fetch` takes
    title: str
    repo: str  # owner/name on GitHub
    commit: str  # the pinned upstream commit
    folder: str  # its files' common folder in the data home
    part_kind: str  # what a part of it is (NAME:PART selects files)
    read_by: str
    licence: str
    citation: str


@dataclass(frozen=True)
class DataFile:
    resource: str
    part: str
    path: str  # relative to the data home
    upstream_path: str  # relative to the repository root at the resource's commit
    sha256: str
    size: int


RESOURCES = {
    r.name: r
    for r in (
        Resource(
            name="g-bli",
            title="G-BLI bilingual lexicon induction dictionaries (28 pairs over de, en, fi, fr, hr, it, ru, "
            "tr; train 500/1k/3k/5k, test 2k)",
            repo="codogogo/xling-eval",
            commit="008a643439707ff64a95e282cc10613124dffce1",
            folder="eval/bli/gbli",
            part_kind="language pair, either order (en-de)",
            read_by="eval's bli and word_alignment tasks, static bli",
            licence="none stated upstream (research use)",
            citation=(
                "Glavaš, Litschko, Ruder, Vulić (2019). How to (Properly) Evaluate Cross-Lingual Word Embeddings: On "
                "Strong Baselines, Comparative Analyses, and Some Misconceptions. ACL."
            ),
        ),
        Resource(
            name="panlex-bli",
            title="PanLex-BLI dictionaries (210 pairs over 15 lower-resource languages; train 500-5000, test 2000)",
            repo="umanlp/babelbert",
            commit="141cb24dfc1ddaa3c2ee9418837efcb5b64e821c",
            folder="eval/bli/panlex",
            part_kind="language pair, either order (bg-ca)",
            read_by="eval --dictionary L1-L2:PATH (the G-BLI/PanLex reader)",
            licence="none stated for the data upstream (PanLex data: CC0); research use",
            citation="Vulić, Glavaš, Reichart, Korhonen (2019). Do We Really Need Fully Unsupervised Cross-Lingual "
            "Embeddings? EMNLP.",
        ),
        Resource(
            name="bli-vocab",
            title="BLI target vocabularies: the 100K most frequent words of fastText's Wikipedia vectors, 21 languages",
            repo="umanlp/babelbert",
            commit="141cb24dfc1ddaa3c2ee9418837efcb5b64e821c",
            folder="eval/vocab",
            part_kind="language (de)",
            read_by="eval's bli task (eval.vocab_dir in training)",
            licence="derived from Wikipedia (CC BY-SA 3.0) through fastText's vectors",
            citation=(
                "Bojanowski, Grave, Joulin, Mikolov (2017). Enriching Word Vectors with Subword Information. TACL."
            ),
        ),
        Resource(
            name="multisimlex",
            title="Multi-SimLex cross-lingual word similarity, 66 pairs over 12 languages",
            repo="umanlp/babelbert",
            commit="141cb24dfc1ddaa3c2ee9418837efcb5b64e821c",
            folder="eval/multisimlex",
            part_kind="language pair, ISO 639-3, either order (eng-fra)",
            read_by="eval's xlsim task",
            licence="none stated in the redistributing repository (research use)",
            citation=(
                "Vulić et al. (2020). Multi-SimLex: A Large-Scale Evaluation of Multilingual and Crosslingual Lexical "
                "Semantic Similarity. Computational Linguistics 46(4)."
            ),
        ),
        Resource(
            name="tatoeba",
            title="Tatoeba sentence retrieval test sets, 112 languages x up to 1000 sentences aligned with English",
            repo="facebookresearch/LASER",
            commit="74bc6ae7ffb7cba670fe0f428d0ede9f666fb821",
            folder="eval/tatoeba",
            part_kind="language, ISO 639-3 (deu)",
            read_by="eval's tatoeba task; bench synthetic's default base corpus",
            licence="Tatoeba corpus: CC BY 2.0 FR",
            citation="Artetxe, Schwenk (2019). Massively Multilingual Sentence Embeddings for Zero-Shot Cross-Lingual "
            "Transfer and Beyond. TACL.",
        ),
        Resource(
            name="omw",
            title="Open Multilingual Wordnet tab files of 25 languages, keyed by Princeton WordNet 3.0 offsets",
            repo="omwn/omw-data",
            commit="f75be19ec590da12a7a5665e361690b5badb7a25",
            folder="lexicons/omw",
            part_kind="wordnet project (fra, mcr)",
            read_by="mine-constraints",
            licence="each wordnet's own (LICENSE-<project> beside it)",
            citation="Bond, Foster (2013). Linking and Extending an Open Multilingual Wordnet. ACL.",
        ),
    )
}


# resources fetched by hand: name -> where to get them and where they go in the data home
MANUAL = {
    "semeval17": "SemEval-2017 Task 2 (cross-lingual word similarity) has no pinned upstream copy to download: get "
    "the task's release (SemEval17-Task2.zip, from https://alt.qcri.org/semeval2017/task2/) and unpack "
    "its SemEval17-Task2/test/subtask2-crosslingual/ folder as <data home>/eval/semeval2017/"
    "subtask2-crosslingual/ (data/<l1>-<l2>.test.data.txt, keys/<l1>-<l2>.test.gold.txt); "
    "docs/guides/data.md",
}


@cache
def all_files() -> tuple[DataFile, ...]:
    files = []
    for line in CATALOG_FILE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            resource, part, path, upstream_path, sha256, size = line.split("\t")
            files.append(DataFile(resource, part, path, upstream_path, sha256, int(size)))
    return tuple(files)


def files_of(name: str, parts: tuple[str, ...] = ()) -> list[DataFile]:
    """The files of resource ``name``, only those of ``parts`` when given (an ``InputError`` names a part it
    lacks and lists its parts)."""
    files = [f for f in all_files() if f.resource == name]
    if not parts:
        return files
    known = {f.part for f in files}
    # a pair in either order (the readers read de-en from G-BLI's en-de file, swapped)
    chosen = {part if part in known else "-".join(reversed(part.split("-"))) for part in parts}
    unknown = [part for part in parts if part not in known and "-".join(reversed(part.split("-"))) not in known]
    if unknown:
        raise InputError(
            f"{name}: no part {', '.join(unknown)} (a {RESOURCES[name].part_kind}); it has: {', '.join(sorted(known))}"
        )
    return [f for f in files if f.part in chosen]


def select(spec: str) -> tuple[Resource, list[DataFile]]:
    """``NAME`` or ``NAME:PART,PART`` -> the resource and the files asked for."""
    name, _, parts = spec.partition(":")
    if name in MANUAL:
        raise InputError(MANUAL[name])
    if name not in RESOURCES:
        raise InputError(
            f"no benchmark resource {name!r}; choose from {', '.join(RESOURCES)} (`distalign data list` describes them)"
        )
    return RESOURCES[name], files_of(name, tuple(p for p in parts.lower().split(",") if p))


def upstream_url(resource: Resource, file: DataFile, mirror: str = "") -> str:
    """The file's raw URL at the pinned commit; a mirror base URL stands in for ``UPSTREAM_ROOT``."""
    root = (mirror or UPSTREAM_ROOT).rstrip("/")
    return f"{root}/{resource.repo}/{resource.commit}/{file.upstream_path}"
