"""``distalign data fetch xnli:de,fr udpos:en,de``: the transfer tasks' Hub data sets saved into the data home.

Each (task, language) is loaded with ``datasets.load_dataset(<hub name>, <config>)`` (the task's ``data_source`` and
``hub_config``, as ``distalign transfer --hub`` loads it) and saved with ``save_to_disk`` as
``<data home>/transfer/<task folder>/<config's language>/``, the folder ``transfer.data.read_split`` reads first.
A folder is saved under a temporary name and renamed when complete, so a reader never sees half of one.

``sources`` (``--hub-source TASK=REPO_OR_FOLDER``) loads a task from another Hub repository or from a local
folder in the Hub's layout instead (e.g. ``facebook/xnli``, or a copy of its parquet files); a proxy of the Hub
itself is ``HF_ENDPOINT``, read by ``datasets``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from filelock import FileLock

from distalign.benchmark_data.home import OFFLINE_ENVS, fetch_command
from distalign.errors import InputError
from distalign.transfer.tasks.registry import TRANSFER_TASKS

SPLITS = ("train", "validation", "test")


def transfer_home(home: Path) -> Path:
    """The data home's transfer folder: ``distalign transfer``'s ``--data-dir`` when none is given."""
    return home / "transfer"


def targets(specs: list[str]) -> dict[Path, tuple[str, str, str]]:
    """Every ``TASK:LANG,LANG`` -> {its folder under the transfer home: (task, hub name, hub config)}, checked
    before anything is loaded (a task with no languages, an unknown task or language config is an error)."""
    wanted: dict[Path, tuple[str, str, str]] = {}
    for spec in specs:
        name, _, langs = spec.partition(":")
        if name not in TRANSFER_TASKS:
            raise InputError(f"no transfer task {name!r}; choose from {', '.join(TRANSFER_TASKS)}")
        task = TRANSFER_TASKS[name]
        languages = [lang.strip() for lang in langs.split(",") if lang.strip()]
        if not languages:
            raise InputError(
                f"{name}: name its languages, e.g. `{fetch_command(name + ':en,de')}` (the Hub data "
                f"set {task.hub_name} has one config per language)"
            )
        for lang in languages:
            for split in SPLITS:  # QA's English train and dev sets are SQuAD's, in their own folder
                try:
                    source = task.data_source(lang, split, {})
                except InputError:  # a split the language does not have (XQuAD's train): its test set is enough
                    continue
                config = source.hub_config or task.hub_config(lang, {})
                wanted[Path(source.folder) / lang] = (name, source.hub_name, config)
    return wanted


def fetch_transfer_sets(
    specs: list[str], home: Path, sources: dict[str, str], offline: bool, say: Callable[[str], object] = print
) -> None:
    """Load and save the data sets of ``specs`` missing from ``home``; ``offline``: load nothing, and name what is
    missing in an ``InputError``."""
    fetched = {spec.partition(":")[0] for spec in specs}
    for task, source in sources.items():
        if task not in fetched or not source:  # a source that would be silently unused
            raise InputError(
                f"--hub-source {task}={source}: give TASK=REPO_OR_FOLDER for a task fetched here "
                f"({', '.join(sorted(fetched)) or 'none named'})"
            )
    root = transfer_home(home)
    wanted = targets(specs)
    missing = {folder: what for folder, what in wanted.items() if not (root / folder / "dataset_dict.json").is_file()}
    if offline and missing:
        lines = [f"  {root / folder} ({hub}/{config})" for folder, (_, hub, config) in missing.items()]
        raise InputError(
            f"offline ({' or '.join(OFFLINE_ENVS)} set): nothing loaded from the Hugging Face Hub; "
            f"missing from the data home {home}:\n"
            + "\n".join(lines)
            + f"\nrun `{fetch_command(' '.join(specs))}` where the Hub (or HF_ENDPOINT's proxy) is "
            "reachable, into this folder or one copied here"
        )
    for folder, (name, hub, config) in wanted.items():
        if hub == TRANSFER_TASKS[name].hub_name:  # the task's own data set (QA's English SQuAD keeps its own)
            hub = sources.get(name, hub)
        if folder in missing:
            _save(name, hub, config, root / folder)
        say(f"{name}: {root / folder}" + (f" saved from {hub}/{config}" if folder in missing else ", there already"))


def _save(name: str, hub: str, config: str, target: Path) -> None:
    """Load ``hub``/``config`` whole and save it as ``target``, complete or not at all."""
    from datasets import load_dataset

    target.parent.mkdir(parents=True, exist_ok=True)
    locks = target.parents[2] / ".locks"  # the data home's, beside the catalogue's
    locks.mkdir(exist_ok=True)
    # nodes sharing a data home: one saves, the others wait and find it there
    with FileLock(locks / f"transfer-{target.parent.name}-{target.name}.lock"):
        if (target / "dataset_dict.json").is_file():
            return
        if target.exists():
            raise InputError(
                f"{name}: {target} exists but is no save_to_disk folder (plain files?): move it away to "
                "fetch the Hub's data set there"
            )
        partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
        cache = target.with_name(f".{target.name}.cache-{os.getpid()}")  # datasets' build cache: dropped once saved
        try:
            try:
                splits = load_dataset(hub, config, cache_dir=str(cache))
            except Exception as err:  # no network, no such config: datasets' message, with what was asked
                raise InputError(
                    f"{name}: cannot load {hub}/{config} from the Hugging Face Hub ({type(err).__name__}"
                    f": {err}); behind a proxy set HF_ENDPOINT, or load it from a copy with --hub-source "
                    f"{name}=FOLDER"
                ) from None
            splits.save_to_disk(str(partial))
            partial.rename(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
