"""What a transfer task plugin is: one class per task family, one subclass per benchmark.

A family (``SentencePairTask``, ``TokenTask``, ``QATask``) owns how its examples are read from the Hub schema
and from plain files, how they become model inputs (``encode``), which Hugging Face head it
fine-tunes (``model_class``), how logits become per-example predictions and how those are scored.
A task (``XNLITask``, ``WikiANNTask``, ...) sets its name, its Hub data set, its labels, its main
metric and its fine-tuning hyper-parameters with their source (``FineTuneSettings``).

``distalign.transfer.tasks.registry.TRANSFER_TASKS`` maps each name to its plugin.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from distalign.data.readers import ReadReport
from distalign.errors import InputError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True, kw_only=True)
class FineTuneSettings:
    """A task's fine-tuning hyper-parameters and where they come from (``source``)."""

    lr: float
    batch_size: int  # the global batch: all workers' examples of one optimizer step together
    epochs: int
    max_length: int  # subword tokens per example, special tokens included
    source: str
    weight_decay: float = 0.0  # XTREME's run_classify.py / run_tag.py default
    warmup_steps: int = 0  # idem; then linear decay to 0
    # optimizer steps between dev evaluations, each a candidate for selection (XTREME's --save_steps); the
    # final weights are one too; 0 = at the end of each epoch
    select_every: int = 0


# XTREME (Hu et al. 2020), github.com/google-research/xtreme scripts/train_<task>.sh: batch 8 per GPU x 4
# accumulated = 32, max length 128, lr 2e-5 for mBERT and XLM-R base; 5 epochs for XNLI and PAWS-X, 10 for
# PAN-X and UD-POS; the dev set of the training language scored every --save_steps (100 XNLI, 200 PAWS-X,
# 1000 PAN-X, 500 UD-POS), the best kept (--save_only_best_checkpoint; third_party/run_classify.py, run_tag.py).
XTREME_CLASSIFY = FineTuneSettings(
    lr=2e-5,
    batch_size=32,
    epochs=5,
    max_length=128,
    source="XTREME scripts/train_xnli.sh, train_pawsx.sh (bert-base-multilingual-cased, xlm-roberta-base)",
)
XTREME_TAG = FineTuneSettings(
    lr=2e-5,
    batch_size=32,
    epochs=10,
    max_length=128,
    source="XTREME scripts/train_panx.sh, train_udpos.sh (bert-base-multilingual-cased, xlm-roberta-base)",
)


@dataclass(frozen=True)
class DataSource:
    """Where one split of one language is read: ``<data_dir>/<folder>/<lang>/`` or the Hub's ``hub_name``/``hub_config``
    ("": the task's ``hub_config(lang)``, asked only when the Hub is used); ``split`` is its name in that
    Hub-schema data set (XQuAD's test set is the Hub's ``validation``)."""

    folder: str
    hub_name: str
    hub_config: str
    split: str


class TransferTask:
    """A labelled task for zero-shot transfer; the class is the plugin (see the module docstring)."""

    name: ClassVar[str]  # --tasks, MLflow transfer/<name>/<lang>/<metric>
    hub_name: ClassVar[str]  # datasets.load_dataset(hub_name, hub_config(lang))
    labels: ClassVar[tuple[str, ...]]  # label names; a label's id is its index here
    main_metric: ClassVar[str]  # selects the epoch, and is the one Δ is taken of
    settings: ClassVar[FineTuneSettings]
    file_suffix: ClassVar[str]  # plain files: <split>.<file_suffix>
    model_class: ClassVar[str]  # the transformers Auto class with this family's head

    @classmethod
    def hub_config(cls, lang: str, configs: dict[str, str]) -> str:
        """The Hub config of ``lang`` (``configs``: the user's ``task:lang`` -> config choices)."""
        return configs.get(f"{cls.name}:{lang}", lang)

    @classmethod
    def data_source(cls, lang: str, split: str, configs: dict[str, str], train_set: str = "") -> DataSource:
        """Where ``split`` of ``lang`` comes from: by default the task's own folder and Hub data set, same split.
        ``train_set``: the data set the source language trains and is selected on ("": the task's default; only
        TyDiQA-GoldP has a choice)."""
        return DataSource(cls.name, cls.hub_name, "", split)

    @classmethod
    def label_id(cls, name: Any, aliases: dict[str, str] | None = None) -> int | None:
        """The id of a label name (or of an id written as text); None if it is not one of ``labels``."""
        text = str(name).strip()
        text = (aliases or {}).get(text, text)
        if text in cls.labels:
            return cls.labels.index(text)
        return None

    @classmethod
    def row_label(cls, value, names: list[str] | None, aliases: dict[str, str] | None = None) -> int | None:
        """The label id of a Hub row's integer label, through the data set's own names (``class_label_names``)
        when it has them; None for a value outside them (e.g. -1, unlabelled)."""
        if not isinstance(value, int) or isinstance(value, bool):
            return None
        if names is None:
            return value if 0 <= value < len(cls.labels) else None
        return cls.label_id(names[value], aliases) if 0 <= value < len(names) else None

    @classmethod
    def from_rows(cls, dataset, where: str, report: ReadReport, lang: str) -> list:
        """Examples of ``lang`` from a ``datasets.Dataset`` in the Hub schema; bad rows skipped with their index."""
        raise NotImplementedError

    @classmethod
    def read_file(cls, path: Path, lang: str, report: ReadReport) -> list:
        """Examples from a plain file; bad rows skipped with ``file:line``."""
        raise NotImplementedError

    @classmethod
    def encode(cls, examples: list, tokenizer, max_length: int) -> list[dict[str, list[int] | int]]:
        """One feature dict per example: ``input_ids``, ``attention_mask``, ``labels``."""
        raise NotImplementedError

    @classmethod
    def logits(cls, outputs) -> torch.Tensor:
        """What the loss and ``predictions`` read of the model's output: [B, C] or [B, T, C] (C classes)."""
        return outputs.logits

    @classmethod
    def predictions(cls, logits: torch.Tensor, labels: torch.Tensor, features: list[dict]) -> list[tuple[Any, Any]]:
        """(gold, predicted) per feature of a batch (``features``: the batch's rows of ``encode``)."""
        raise NotImplementedError

    @classmethod
    def score(cls, pairs: list[tuple[Any, Any]]) -> dict[str, float]:
        """Metrics from the (gold, predicted) pairs of one evaluation set; ``main_metric`` among them."""
        raise NotImplementedError

    @classmethod
    def prediction_rows(cls, pairs: list[tuple[Any, Any]]) -> list[dict]:
        """The (gold, predicted) pairs of one evaluation set as the rows of its predictions file: ``id`` (the
        example's index in the set), ``gold`` and ``predicted`` as label names (a label, or a sentence's tags)."""

        def named(value):
            return cls.labels[value] if isinstance(value, int) else [cls.labels[v] for v in value]

        return [
            {"id": i, "gold": named(gold), "predicted": named(predicted)} for i, (gold, predicted) in enumerate(pairs)
        ]


def class_label_names(dataset, column: str, where: str) -> list[str] | None:
    """The label names a data set's features give ``column`` (a ClassLabel, or a sequence of them); None when
    the column holds plain integers (then they are taken as the task's own label ids)."""
    if column not in dataset.column_names:
        raise InputError(f"{where}: no column {column!r} (columns: {dataset.column_names})")
    feature = dataset.features[column]
    feature = getattr(feature, "feature", feature)  # Sequence(ClassLabel) / List(ClassLabel)
    return list(feature.names) if hasattr(feature, "names") else None


def require_columns(dataset, columns: tuple[str, ...], where: str) -> None:
    missing = [c for c in columns if c not in dataset.column_names]
    if missing:
        raise InputError(f"{where}: no column(s) {missing} (columns: {dataset.column_names})")
