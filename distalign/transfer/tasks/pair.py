"""Sentence-pair classification (XNLI, PAWS-X): ``<s> a </s></s> b </s>`` -> one label; accuracy."""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

from distalign.data.readers import ReadReport
from distalign.errors import InputError
from distalign.transfer.metrics import accuracy
from distalign.transfer.tasks.base import (
    XTREME_CLASSIFY,
    FineTuneSettings,
    TransferTask,
    class_label_names,
    require_columns,
)


@dataclass(frozen=True)
class PairExample:
    first: str
    second: str
    label: int


class SentencePairTask(TransferTask):
    """The family: two texts, one label per pair, accuracy."""

    main_metric: ClassVar[str] = "acc"
    file_suffix: ClassVar[str] = "tsv"
    model_class: ClassVar[str] = "AutoModelForSequenceClassification"
    text_columns: ClassVar[tuple[str, str]]  # the Hub schema's two text columns
    # plain TSV files: a header row; these column names are recognised (XNLI 1.0's and XTREME's files)
    file_columns: ClassVar[dict[str, tuple[str, ...]]] = {
        "first": ("premise", "sentence1"),
        "second": ("hypothesis", "sentence2"),
        "label": ("label", "gold_label"),
    }
    label_aliases: ClassVar[dict[str, str]] = {}

    @classmethod
    def from_rows(cls, dataset, where: str, report: ReadReport, lang: str) -> list[PairExample]:
        first, second = cls.text_columns
        require_columns(dataset, (first, second, "label"), where)
        names = class_label_names(dataset, "label", where)
        examples = []
        for index, row in enumerate(dataset):
            label = row["label"]
            label_id = cls.row_label(label, names, cls.label_aliases)
            a, b = row[first], row[second]
            if label_id is None:
                report.skip(index, f"label {label!r} is not one of {list(names or range(len(cls.labels)))}")
            elif not isinstance(a, str) or not isinstance(b, str) or not a.strip() or not b.strip():
                report.skip(index, f"empty or missing {first}/{second}")
            else:
                examples.append(PairExample(a, b, label_id))
        report.rows = len(examples)
        return examples

    @classmethod
    def read_file(cls, path: Path, lang: str, report: ReadReport) -> list[PairExample]:
        """A TSV with a header row naming its columns (``premise``/``sentence1``, ``hypothesis``/``sentence2``,
        ``label``/``gold_label``); a ``language`` column, if any, keeps only ``lang``'s rows (XNLI 1.0's
        test file holds every language)."""
        with path.open(encoding="utf-8", newline="") as f:
            rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
            header = next(rows, None)
            if header is None:
                raise InputError(f"{path}: empty file")
            position = {}
            for role, names in cls.file_columns.items():
                found = [header.index(n) for n in names if n in header]
                if not found:
                    raise InputError(f"{path}:1: header has none of {list(names)} (header: {header})")
                position[role] = found[0]
            language = header.index("language") if "language" in header else None
            examples = []
            for line_no, row in enumerate(rows, start=2):
                if language is not None and len(row) > language and row[language] != lang:
                    continue
                if len(row) <= max(position.values()):
                    report.skip(line_no, f"{len(row)} columns, expected {len(header)}")
                    continue
                label_id = cls.label_id(row[position["label"]], cls.label_aliases)
                a, b = row[position["first"]], row[position["second"]]
                if label_id is None:
                    report.skip(line_no, f"label {row[position['label']]!r} is not one of {list(cls.labels)}")
                elif not a.strip() or not b.strip():
                    report.skip(line_no, "empty text")
                else:
                    examples.append(PairExample(a, b, label_id))
        report.rows = len(examples)
        return examples

    @classmethod
    def encode(cls, examples: list[PairExample], tokenizer, max_length: int) -> list[dict]:
        encoded = tokenizer(
            [e.first for e in examples], [e.second for e in examples], truncation=True, max_length=max_length
        )
        # segment ids where the model has them (mBERT: 1 on the second text); XLM-R's tokenizer gives none
        inputs = [key for key in ("input_ids", "attention_mask", "token_type_ids") if key in encoded]
        return [{**{key: encoded[key][i] for key in inputs}, "labels": e.label} for i, e in enumerate(examples)]

    @classmethod
    def predictions(cls, logits, labels, features) -> list[tuple[int, int]]:
        return list(zip(labels.tolist(), logits.argmax(-1).tolist()))

    @classmethod
    def score(cls, pairs) -> dict[str, float]:
        return {"acc": accuracy([g for g, _ in pairs], [p for _, p in pairs])}


class XNLITask(SentencePairTask):
    """XNLI (Conneau et al. 2018): MultiNLI's English training set, dev/test in 15 languages."""

    name: ClassVar[str] = "xnli"
    hub_name: ClassVar[str] = "xnli"  # configs: ar, bg, de, el, en, es, fr, hi, ru, sw, th, tr, ur, vi, zh
    labels: ClassVar[tuple[str, ...]] = ("entailment", "neutral", "contradiction")  # the Hub's ClassLabel order
    label_aliases: ClassVar[dict[str, str]] = {"contradictory": "contradiction"}  # XNLI-MT's train files
    text_columns: ClassVar[tuple[str, str]] = ("premise", "hypothesis")
    settings: ClassVar[FineTuneSettings] = replace(XTREME_CLASSIFY, select_every=100)


class PAWSXTask(SentencePairTask):
    """PAWS-X (Yang et al. 2019): paraphrase or not, English training set, dev/test in 7 languages."""

    name: ClassVar[str] = "pawsx"
    hub_name: ClassVar[str] = "paws-x"  # configs: de, en, es, fr, ja, ko, zh
    labels: ClassVar[tuple[str, ...]] = ("0", "1")  # 1 = paraphrase
    text_columns: ClassVar[tuple[str, str]] = ("sentence1", "sentence2")
    settings: ClassVar[FineTuneSettings] = replace(XTREME_CLASSIFY, select_every=200)
