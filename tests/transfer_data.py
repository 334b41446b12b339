"""Tiny labelled data sets in the Hugging Face Hub schemas of xnli, paws-x, wikiann and universal_dependencies,
built offline (``Dataset.from_dict`` with the Hub's features, ``save_to_disk``), and a tiny model for them."""

from __future__ import annotations

import random
from pathlib import Path

from datasets import ClassLabel, Dataset, DatasetDict, Features, List, Value

from distalign.models.loading import TinyModelConfig, build_tiny_model
from distalign.transfer.tasks.tagging import UPOS

NLI = ["entailment", "neutral", "contradiction"]
NER = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
# per language: (names, places, verbs): the sentences' words; the same concept has the same index
LEXICON = {
    "en": (["anna", "peter", "maria"], ["berlin", "paris", "rome"], ["sees", "likes", "visits"]),
    "de": (["anna", "peter", "maria"], ["berlin", "paris", "rom"], ["sieht", "mag", "besucht"]),
    "fr": (["anne", "pierre", "marie"], ["berlin", "paris", "rome"], ["voit", "aime", "visite"]),
}
FEATURES = {
    "xnli": Features({"premise": Value("string"), "hypothesis": Value("string"), "label": ClassLabel(names=NLI)}),
    "pawsx": Features(
        {
            "id": Value("int32"),
            "sentence1": Value("string"),
            "sentence2": Value("string"),
            "label": ClassLabel(names=["0", "1"]),
        }
    ),
    "wikiann": Features(
        {
            "tokens": List(Value("string")),
            "ner_tags": List(ClassLabel(names=NER)),
            "langs": List(Value("string")),
            "spans": List(Value("string")),
        }
    ),
    "udpos": Features(
        {
            "idx": Value("string"),
            "text": Value("string"),
            "tokens": List(Value("string")),
            "lemmas": List(Value("string")),
            "upos": List(ClassLabel(names=list(UPOS))),
            "xpos": List(Value("string")),
            "feats": List(Value("string")),
            "head": List(Value("string")),
            "deprel": List(Value("string")),
            "deps": List(Value("string")),
            "misc": List(Value("string")),
        }
    ),
}


def tagged_sentence(lang: str, rng: random.Random) -> tuple[list[str], list[str], list[str]]:
    """(words, NER tags, UPOS tags): "<name> <verb> <place>" or "<name> <name> <verb> <place>"."""
    names, places, verbs = LEXICON[lang]
    people = rng.sample(names, rng.choice([1, 2]))
    words = people + [rng.choice(verbs), rng.choice(places)]
    ner = ["B-PER"] + ["I-PER"] * (len(people) - 1) + ["O", "B-LOC"]
    upos = ["PROPN"] * len(people) + ["VERB", "PROPN"]
    return words, ner, upos


def rows(task: str, lang: str, n: int, seed: int) -> dict[str, list]:
    rng = random.Random(seed)
    if task in ("xnli", "pawsx"):
        firsts, seconds, labels = [], [], []
        for _ in range(n):
            words, _, _ = tagged_sentence(lang, rng)
            label = rng.randrange(3 if task == "xnli" else 2)
            other = list(words) if label == 0 else list(reversed(words))
            firsts.append(" ".join(words))
            seconds.append(" ".join(other))
            labels.append(label)
        if task == "xnli":
            return {"premise": firsts, "hypothesis": seconds, "label": labels}
        return {"id": list(range(n)), "sentence1": firsts, "sentence2": seconds, "label": labels}
    sentences = [tagged_sentence(lang, rng) for _ in range(n)]
    if task == "wikiann":
        return {
            "tokens": [w for w, _, _ in sentences],
            "ner_tags": [[NER.index(t) for t in tags] for _, tags, _ in sentences],
            "langs": [[lang] * len(w) for w, _, _ in sentences],
            "spans": [[] for _ in sentences],
        }
    empty = [["_"] * len(w) for w, _, _ in sentences]
    return {
        "idx": [f"{lang}-{i}" for i in range(n)],
        "text": [" ".join(w) for w, _, _ in sentences],
        "tokens": [w for w, _, _ in sentences],
        "lemmas": empty,
        "upos": [[UPOS.index(t) for t in tags] for _, _, tags in sentences],
        "xpos": empty,
        "feats": empty,
        "head": empty,
        "deprel": empty,
        "deps": empty,
        "misc": empty,
    }


def save_task(root: Path, task: str, lang: str, sizes=(32, 12, 12), seed: int = 0) -> Path:
    """``<root>/<task>/<lang>/``: a DatasetDict (train, validation, test) in the task's Hub schema."""
    out = root / task / lang
    splits = {
        split: Dataset.from_dict(rows(task, lang, n, seed * 10 + i), features=FEATURES[task])
        for i, (split, n) in enumerate(zip(("train", "validation", "test"), sizes))
    }
    DatasetDict(splits).save_to_disk(str(out))
    return out


def tiny_model(out: Path) -> Path:
    """A random-init XLM-R-style model whose tokenizer is trained on the fixtures' words."""
    words = [w for names, places, verbs in LEXICON.values() for w in names + places + verbs]
    texts = [" ".join(random.Random(i).sample(words, 5)) for i in range(200)]
    return build_tiny_model(
        out,
        texts,
        TinyModelConfig(vocab_size=80, hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32, max_length=64),
    )
