"""The transfer metrics and the first-subword label alignment, as pure functions (lists in, numbers out).

- ``accuracy``: XNLI, PAWS-X (per pair) and UD-POS (per word);
- ``entity_scores``: NER precision/recall/F1 over whole entities (``seqeval`` 1.2.2 in its default
  conlleval mode, as XTREME's ``run_tag.py`` scores PAN-X);
- ``first_subword_labels``: a word's label on its first subword, ``IGNORE`` (-100) on its other
  subwords and on special tokens (XTREME's and BERT's convention for tagging);
- ``qa_scores``: extractive QA's exact match and F1 (SQuAD v1.1's evaluation, or MLQA's per language).
"""

from __future__ import annotations

import functools
import re
import string
import sys
import unicodedata
from collections import Counter
from collections.abc import Sequence

IGNORE = -100  # the label of positions the loss and the metrics leave out (PyTorch's cross-entropy default)


def accuracy(gold: Sequence, predicted: Sequence) -> float:
    """Share of positions where the prediction equals the gold label."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    if not gold:
        raise ValueError("accuracy of nothing: no labelled examples")
    return sum(g == p for g, p in zip(gold, predicted)) / len(gold)


def entity_scores(gold: list[list[str]], predicted: list[list[str]]) -> dict[str, float]:
    """Entity-level precision, recall and F1 of BIO tag sequences (one list of tag names per sentence)."""
    from seqeval.metrics import f1_score, precision_score, recall_score

    if [len(s) for s in gold] != [len(s) for s in predicted]:
        raise ValueError("gold and predicted tag sequences differ in length")
    return {
        "precision": precision_score(gold, predicted),
        "recall": recall_score(gold, predicted),
        "f1": f1_score(gold, predicted),
    }


def first_subword_labels(word_ids: Sequence[int | None], word_labels: Sequence[int]) -> list[int]:
    """Per token: the label of its word if it is the word's first subword, else ``IGNORE``.

    ``word_ids`` is a fast tokenizer's ``word_ids()``: the word index of each token, None for special tokens.
    """
    labels, previous = [], None
    for word in word_ids:
        labels.append(IGNORE if word is None or word == previous else word_labels[word])
        previous = word
    return labels


# Extractive QA: the SQuAD v1.1 evaluation (XQuAD, TyDiQA-GoldP) and MLQA's per-language variant of it, as
# XTREME scores them (its evaluate.py: third_party/evaluate_squad.py, evaluate_mlqa.py). Written from their
# definitions: lowercase, drop punctuation, drop articles, split on whitespace; EM = the normalised strings are
# equal, F1 = harmonic mean of token precision and recall (bag of tokens); each the max over the gold answers.
SQUAD_PUNCTUATION = frozenset(string.punctuation)  # ASCII only, as SQuAD v1.1's script
# MLQA's articles per language (its script's list); hi and zh have none
MLQA_ARTICLES = {
    "en": re.compile(r"\b(a|an|the)\b"),
    "es": re.compile(r"\b(un|una|unos|unas|el|la|los|las)\b"),
    "de": re.compile(r"\b(ein|eine|einen|einem|eines|einer|der|die|das|den|dem|des)\b"),
    "vi": re.compile(r"\b(của|là|cái|chiếc|những)\b"),
    "ar": re.compile("ال"),  # MLQA's pattern removes "al" wherever it occurs, inside words too
    "hi": None,
    "zh": None,
}
CJK = re.compile("[\u4e00-\u9fa5]")


@functools.cache
def mlqa_punctuation() -> frozenset[str]:
    """MLQA's: every Unicode punctuation character (categories P*) and the ASCII set (which adds $ + < ^ ...);
    built on first use (a pass over all code points)."""
    return SQUAD_PUNCTUATION | {
        chr(i) for i in range(sys.maxunicode + 1) if unicodedata.category(chr(i)).startswith("P")
    }


def _mixed_segmentation(text: str) -> list[str]:
    """MLQA's Chinese tokens: each CJK ideograph (and punctuation mark) alone, whitespace splits the rest."""
    tokens: list[str] = []
    run: list[str] = []
    punctuation = mlqa_punctuation()
    for char in text:
        if CJK.match(char) or char in punctuation:
            tokens += "".join(run).split()
            tokens.append(char)
            run = []
        else:
            run.append(char)
    return tokens + "".join(run).split()


def answer_tokens(text: str, lang: str | None = None) -> list[str]:
    """The normalised tokens of an answer: SQuAD v1.1's with ``lang`` None, MLQA's for one of its languages."""
    text = text.lower()
    if lang is None:
        text = "".join(c for c in text if c not in SQUAD_PUNCTUATION)
        return re.sub(r"\b(a|an|the)\b", " ", text).split()
    if lang not in MLQA_ARTICLES:
        raise ValueError(f"MLQA's evaluation has no rules for language {lang!r} (it has {sorted(MLQA_ARTICLES)})")
    punctuation = mlqa_punctuation()
    text = "".join(c for c in text if c not in punctuation)
    articles = MLQA_ARTICLES[lang]
    text = articles.sub(" ", text) if articles else text
    return _mixed_segmentation(text) if lang == "zh" else text.split()


def answer_f1(predicted: list[str], gold: list[str]) -> float:
    """Token F1 of two normalised answers (0 when they share no token)."""
    same = sum((Counter(predicted) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def qa_scores(gold: Sequence[Sequence[str]], predicted: Sequence[str], lang: str | None = None) -> dict[str, float]:
    """Exact match and F1 (in [0, 1]) of one predicted answer per question against its gold answers."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} questions but {len(predicted)} predictions")
    if not gold:
        raise ValueError("QA scores of nothing: no questions")
    em = f1 = 0.0
    for answers, prediction in zip(gold, predicted):
        mine = answer_tokens(prediction, lang)
        golds = [answer_tokens(a, lang) for a in answers]
        # EM compares the normalised strings: joined tokens (equal to SQuAD's whitespace-fixed string)
        em += max(float(mine == g) for g in golds)
        f1 += max(answer_f1(mine, g) for g in golds)
    return {"em": em / len(gold), "f1": f1 / len(gold)}
