"""The transfer metrics and the first-subword label alignment, as pure functions (lists in, numbers out).

- ``accuracy``: XNLI, PAWS-X (per pair) and UD-POS (per word);
- ``entity_scores``: NER precision/recall/F1 over whole entities (``seqeval`` 1.2.2 in its default
  conlleval mode, as XTREME's ``run_tag.py`` scores PAN-X);
- ``first_subword_labels``: a word's label on its first subword, ``IGNORE`` (-100) on its other
  subwords and on special tokens (XTREME's and BERT's convention for tagging).
"""

from __future__ import annotations

from typing import Sequence

from distalign.transfer.tasks.base import IGNORE


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
    return {"precision": precision_score(gold, predicted), "recall": recall_score(gold, predicted),
            "f1": f1_score(gold, predicted)}


def first_subword_labels(word_ids: Sequence[int | None], word_labels: Sequence[int]) -> list[int]:
    """Per token: the label of its word if it is the word's first subword, else ``IGNORE``.

    ``word_ids`` is a fast tokenizer's ``word_ids()``: the word index of each token, None for special tokens.
    """
    labels, previous = [], None
    for word in word_ids:
        labels.append(IGNORE if word is None or word == previous else word_labels[word])
        previous = word
    return labels
