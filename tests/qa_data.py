"""Tiny extractive-QA data sets in the Hugging Face Hub schemas of squad, xquad, mlqa and tydiqa (secondary_task),
built offline (``Dataset.from_dict`` + ``save_to_disk``), and the same questions as a SQuAD JSON file.

Contexts are made of the fixtures' vocabulary (``transfer_data.LEXICON``), so the tiny tokenizer knows every word:
"<name> <verb> <place>" sentences, one per name. The question is a sentence's "<verb> <place>" and the answer its
name; the name of a (verb, place) is fixed (``answer_of``), so a question has the same answer in every context.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from datasets import Dataset, DatasetDict, Features, List, Value
from transfer_data import LEXICON

ANSWERS = {"text": List(Value("string")), "answer_start": List(Value("int32"))}
SQUAD_FEATURES = Features(
    {
        "id": Value("string"),
        "title": Value("string"),
        "context": Value("string"),
        "question": Value("string"),
        "answers": ANSWERS,
    }
)
FEATURES = {
    "squad": SQUAD_FEATURES,
    "xquad": Features(
        {"id": Value("string"), "context": Value("string"), "question": Value("string"), "answers": ANSWERS}
    ),
    "mlqa": Features(
        {
            "context": Value("string"),
            "question": Value("string"),
            "answers": {"answer_start": List(Value("int32")), "text": List(Value("string"))},
            "id": Value("string"),
        }
    ),
    "tydiqa": SQUAD_FEATURES,
}
# the Hub splits of each data set, in the order the sizes are given
SPLITS = {
    "squad": ("train", "validation"),
    "xquad": ("validation",),
    "mlqa": ("validation", "test"),
    "tydiqa": ("train", "validation"),
}
TYDIQA_PREFIX = {"en": "english", "sw": "swahili"}


def words(lang: str) -> tuple[list[str], list[str], list[str]]:
    """(names, places, verbs) of ``lang``; a language without fixture words (TyDiQA's sw) borrows the French ones."""
    return LEXICON.get(lang, LEXICON["fr"])


def answer_of(lang: str, verb: int, place: int) -> str:
    return words(lang)[0][(verb + place) % 3]


def question(lang: str, rng: random.Random, sentences: int = 3) -> tuple[str, str, str, int]:
    """(question, context, answer, answer_start): ``sentences`` sentences with distinct names, one the answer's."""
    _, places, verbs = words(lang)
    pairs = {}
    while len(pairs) < sentences:  # a (verb, place) for distinct names
        verb, place = rng.randrange(3), rng.randrange(3)
        pairs.setdefault(answer_of(lang, verb, place), (verb, place))
    order = list(pairs.items())
    rng.shuffle(order)
    asked = rng.randrange(sentences)
    context, start = "", 0
    for i, (name, (verb, place)) in enumerate(order):
        if i == asked:
            start = len(context)
        context += f"{name} {verbs[verb]} {places[place]} "
    name, (verb, place) = order[asked]
    return f"{verbs[verb]} {places[place]}", context.strip(), name, start


def rows(data_set: str, lang: str, n: int, seed: int) -> dict[str, list]:
    rng = random.Random(seed)
    out = {"id": [], "title": [], "context": [], "question": [], "answers": []}
    for i in range(n):
        q, context, answer, start = question(lang, rng)
        prefix = f"{TYDIQA_PREFIX[lang]}-" if data_set == "tydiqa" else ""
        out["id"].append(f"{prefix}{seed}-{i}")
        out["title"].append("t")
        out["context"].append(context)
        out["question"].append(q)
        out["answers"].append({"text": [answer], "answer_start": [start]})
    if data_set in ("xquad", "mlqa"):
        del out["title"]
    return out


def save_qa(root: Path, data_set: str, lang: str, sizes: tuple[int, ...], seed: int = 0, other_lang: str = "") -> Path:
    """``<root>/<data_set>/<lang>/``: a DatasetDict with the data set's Hub splits; for tydiqa, ``other_lang``'s
    rows are mixed in (the Hub's config holds every language)."""
    out = root / data_set / lang
    splits = {}
    for i, (split, n) in enumerate(zip(SPLITS[data_set], sizes)):
        data = rows(data_set, lang, n, seed * 10 + i)
        if other_lang:
            other = rows(data_set, other_lang, 2, seed * 10 + i + 5)
            data = {key: values[:1] + other[key] + values[1:] for key, values in data.items()}
        splits[split] = Dataset.from_dict(data, features=FEATURES[data_set])
    DatasetDict(splits).save_to_disk(str(out))
    return out


def squad_json(path: Path, data: dict[str, list]) -> Path:
    """The rows as SQuAD v1.1's JSON: one article, a paragraph per question."""
    paragraphs = [
        {
            "context": context,
            "qas": [
                {
                    "id": id_,
                    "question": q,
                    "answers": [{"text": t, "answer_start": s} for t, s in zip(a["text"], a["answer_start"])],
                }
            ],
        }
        for id_, context, q, a in zip(data["id"], data["context"], data["question"], data["answers"])
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"version": "1.1", "data": [{"title": "t", "paragraphs": paragraphs}]}), encoding="utf-8"
    )
    return path
