"""``distalign data fetch`` and ``data list``: the catalogue's resources into the data home, and what is there."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from filelock import FileLock
from tqdm import tqdm

from distalign.benchmark_data.catalog import RESOURCES, DataFile, Resource, select, upstream_url
from distalign.benchmark_data.download import download, part_path
from distalign.benchmark_data.home import OFFLINE_ENVS, fetch_command, is_present
from distalign.errors import InputError


def size_text(size: int) -> str:
    return tqdm.format_sizeof(size, suffix="B")


def selections(specs: list[str]) -> list[tuple[Resource, list[DataFile]]]:
    """Every ``NAME[:PART,...]`` (``all``: every resource) checked before anything is fetched; one entry per
    resource, its parts merged."""
    chosen: dict[str, tuple[Resource, dict[str, DataFile]]] = {}
    for name in (name for spec in specs for name in (RESOURCES if spec == "all" else [spec])):
        resource, files = select(name)
        chosen.setdefault(resource.name, (resource, {}))[1].update((f.path, f) for f in files)
    return [(resource, list(files.values())) for resource, files in chosen.values()]


def fetch(
    specs: list[str], home: Path, mirror: str = "", offline: bool = False, say: Callable[[str], object] = print
) -> None:
    """Download the files of ``specs`` missing from ``home``; ``offline``: download nothing, and name what is
    missing in an ``InputError`` (none missing: nothing to say but that)."""
    wanted = [(resource, files, [f for f in files if not is_present(f, home)]) for resource, files in selections(specs)]
    if offline and any(missing for _, _, missing in wanted):
        lines = [
            f"  {resource.name}: {len(missing)} of {len(files)} files ({size_text(sum(f.size for f in missing))})"
            f" missing, e.g. {home / missing[0].path}"
            for resource, files, missing in wanted
            if missing
        ]
        raise InputError(
            f"offline ({' or '.join(OFFLINE_ENVS)} set): nothing downloaded; missing from the data home "
            f"{home}:\n" + "\n".join(lines) + f"\nrun `{fetch_command(' '.join(specs))}` where the "
            "network (or a --mirror) is reachable, into this folder or one copied here"
        )
    for resource, files, missing in wanted:
        folder = home / resource.folder
        if missing:
            _fetch_files(resource, missing, home, mirror)
        say(
            f"{resource.name}: {len(files)} files ({size_text(sum(f.size for f in files))}) in {folder}"
            + (f", {len(missing)} fetched" if missing else ", all there already")
        )


def _fetch_files(resource: Resource, files: list[DataFile], home: Path, mirror: str) -> None:
    """One process per resource at a time (nodes fetching into one shared data home wait for each other)."""
    (home / ".locks").mkdir(parents=True, exist_ok=True)
    with FileLock(home / ".locks" / f"{resource.name}.lock"):
        resumed = sum(part_path(home / f.path).stat().st_size for f in files if part_path(home / f.path).is_file())
        with tqdm(
            total=sum(f.size for f in files), initial=resumed, unit="B", unit_scale=True, desc=resource.name
        ) as bar:
            for file in files:
                if is_present(file, home):  # fetched by another process while this one waited
                    bar.update(file.size)
                    continue
                download(upstream_url(resource, file, mirror), home / file.path, file.sha256, file.size, bar.update)


def listing(home: Path) -> str:
    """A table of every resource: its size, licence and how much of it is in ``home``."""
    rows = [("name", "size", "in data home", "licence")]
    for resource in RESOURCES.values():
        files = select(resource.name)[1]
        present = sum(is_present(f, home) for f in files)
        state = "yes" if present == len(files) else "no" if not present else f"{present}/{len(files)} files"
        rows.append((resource.name, size_text(sum(f.size for f in files)), state, resource.licence))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    table = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[3] for row in rows)
    saved = sorted(p.parent for p in (home / "transfer").glob("*/*/dataset_dict.json"))  # `data fetch xnli:de`
    transfer = "".join(
        f"\n  {task}: {', '.join(p.name for p in saved if p.parent.name == task)}"
        for task in dict.fromkeys(p.parent.name for p in saved)
    )
    return (
        f"data home: {home}\n{table}\ntransfer tasks saved in {home / 'transfer'}:{transfer or ' none'}\n"
        f"get one with `{fetch_command('NAME')}` (a transfer task: `{fetch_command('xnli:en,de')}`); "
        "docs/guides/data.md has sources and citations"
    )
