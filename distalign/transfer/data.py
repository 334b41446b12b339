"""The labelled data of a transfer task, read and checked on the driver before any Ray work.

For (task, language, split) the first of these that exists is read (``<task>`` and the Hub data set, config and
split as the task's ``data_source`` says: QA's source language reads SQuAD from ``<data_dir>/squad/en/``):

1. ``<data_dir>/<task>/<lang>/``, a ``DatasetDict.save_to_disk`` folder in the Hub schema
   (``datasets.load_from_disk``; splits ``train``, ``validation``, ``test``);
2. ``<data_dir>/<task>/<lang>/<split>.<suffix>``, a plain file (``dev`` also names ``validation``):
   ``.tsv`` for the sentence-pair tasks, ``.conll`` for NER, ``.conllu`` for POS;
3. with ``hub``, ``datasets.load_dataset(<hub name>, <config>, split=split)`` (needs internet; the
   config is the language, or the treebank for UD).

Bad rows are counted and skipped (``ReadReport``: ``file:line`` or ``<folder>[split]:<row index>``); a
split or language with none of these is an ``InputError`` naming what was looked for.
"""

from __future__ import annotations

from pathlib import Path

from distalign.benchmark_data.home import fetch_command
from distalign.data.readers import ReadReport
from distalign.errors import ConfigError, InputError
from distalign.languages import language_code
from distalign.transfer.tasks.base import TransferTask

FILE_NAMES = {"train": ("train",), "validation": ("validation", "dev"), "test": ("test",)}


def language_folder(parent: Path, lang: str) -> Path:
    """``parent/<lang>``, or the one folder there named by another code of the same language (``deu`` for ``de``)."""
    if (parent / lang).is_dir() or not parent.is_dir():
        return parent / lang
    same = [p for p in parent.iterdir() if p.is_dir() and _code_or_none(p) == lang]
    return same[0] if len(same) == 1 else parent / lang


def _code_or_none(folder: Path) -> str | None:
    try:
        return language_code(folder.name, str(folder))
    except ConfigError:  # a folder that names no language
        return None


def read_split(
    task: type[TransferTask],
    data_dir: str,
    lang: str,
    split: str,
    hub: bool = False,
    hub_configs: dict[str, str] | None = None,
    train_set: str = "",
) -> tuple[list, ReadReport]:
    """The examples of one split of one language, and what reading them kept and skipped (``train_set``: see
    ``TransferTask.data_source``)."""
    source = task.data_source(lang, split, hub_configs or {}, train_set)
    folder = language_folder(Path(data_dir) / source.folder, lang) if data_dir else None
    looked = []
    if folder is not None:
        if (folder / "dataset_dict.json").is_file():
            from datasets import load_from_disk

            try:
                splits = load_from_disk(str(folder))
            except Exception as err:  # datasets' own errors name no folder (a split saved with 0 rows: IndexError)
                why = (
                    "a split with no rows is saved but cannot be read back: save the DatasetDict again without "
                    "empty splits"
                    if isinstance(err, IndexError)
                    else "its files are cut short or corrupted: save it again (save_to_disk), or copy it again"
                )
                raise InputError(
                    f"{task.name}: {folder}: datasets cannot load this save_to_disk folder ({type(err).__name__}: "
                    f"{err}); {why}, or give each split as a plain file ({folder}/<split>.{task.file_suffix})"
                ) from None
            if source.split not in splits:
                raise InputError(
                    f"{task.name}: {folder} has no {source.split!r} split for language {lang} (splits: {list(splits)})"
                )
            where = f"{folder}[{source.split}]"
            report = ReadReport(where)
            return task.from_rows(splits[source.split], where, report, lang), report
        looked.append(str(folder / "dataset_dict.json"))
        for name in FILE_NAMES[split]:
            path = folder / f"{name}.{task.file_suffix}"
            if path.is_file():
                report = ReadReport(str(path))
                return task.read_file(path, lang, report), report
            looked.append(str(path))
    if hub:
        from datasets import load_dataset

        config = source.hub_config or task.hub_config(lang, hub_configs or {})
        where = f"{source.hub_name}/{config}[{source.split}]"
        try:
            rows = load_dataset(source.hub_name, config, split=source.split)
        except Exception as err:  # no such config or split, no network: one error naming them
            raise InputError(f"{task.name}: cannot load {where} from the Hugging Face Hub: {err}") from err
        report = ReadReport(where)
        return task.from_rows(rows, where, report, lang), report
    raise InputError(
        f"{task.name}: no {split} data for language {lang}: looked for "
        f"{', '.join(looked) or 'nothing (no data directory)'}; fetch it into the data home with "
        f"`{fetch_command(f'{task.name}:{lang}')}`, or pass --hub to load {source.hub_name} from the "
        "Hugging Face Hub"
    )
