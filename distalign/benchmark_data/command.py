"""``distalign data fetch NAME...`` and ``distalign data list`` (light at import: the CLI's --help stays fast).

    distalign data list
    distalign data fetch g-bli tatoeba multisimlex
    distalign data fetch g-bli:de-en,en-fi bli-vocab:de,en,fi --mirror https://proxy.example.org/github-raw
    DISTALIGN_DATA=/shared/distalign-data distalign data fetch all
    distalign data fetch xnli:en,de,fr udpos:en,de     # transfer tasks: their Hub data sets, saved (save_to_disk)

The transfer tasks' fetcher lives on the transfer floor, above this package: the CLI hands it in (``register``).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from distalign.benchmark_data.catalog import RESOURCES, UPSTREAM_ROOT
from distalign.benchmark_data.home import DATA_ENV, MIRROR_ENV, OFFLINE_ENVS, data_home, offline

TransferFetcher = tuple[tuple[str, ...], Callable[..., None] | None]  # task names, their fetcher


def register(sub, arguments: bool, transfer: Callable[[], TransferFetcher] | None = None) -> None:
    """The ``data`` command on the CLI's subparsers (its arguments only when ``arguments``). ``transfer()``: the
    transfer task names and their fetcher ``(specs, home, sources, offline)``, asked only when ``data fetch`` runs
    (the task registry is not light)."""
    data = sub.add_parser(
        "data",
        help=f"benchmark data by name: list the evaluation resources, fetch them into the data home (${DATA_ENV})",
    )
    if not arguments:
        return
    commands = data.add_subparsers(dest="data_command", required=True)
    listing = commands.add_parser("list", help="each resource: size, licence, whether it is in the data home")
    listing.set_defaults(func=_list)
    fetch = commands.add_parser(
        "fetch",
        help="download resources into the data home (pinned upstream commits, SHA-256 checked)",
        description=f"Download each resource's files from its upstream repository at a pinned commit into the data "
        f"home (${DATA_ENV}, default ~/.cache/distalign/data), in the layout the readers expect: "
        f"resumable (a .part file continued with a Range request), and a file gets its name only once "
        f"its SHA-256 is the pinned one. With {' or '.join(OFFLINE_ENVS)}=1 nothing is downloaded: "
        "what is missing is listed. Transfer tasks are loaded with Hugging Face datasets (a proxy of "
        "the Hub: HF_ENDPOINT) and saved as <data home>/transfer/<task>/<lang>/, where `distalign "
        "transfer` and `eval --tasks xnli` read them when no --data-dir is given.",
    )
    fetch.add_argument(
        "names",
        nargs="+",
        metavar="NAME",
        help=f"resource names ({', '.join(RESOURCES)}, or all), each optionally with some of its "
        "parts: g-bli:de-en,en-fi; or transfer tasks (those of `distalign transfer --tasks`) "
        "with their languages: xnli:en,de",
    )
    fetch.add_argument(
        "--hub-source",
        action="append",
        default=[],
        metavar="TASK=REPO_OR_FOLDER",
        help="load a transfer task from this Hub repository or local folder in the Hub's layout "
        "instead of its default data set (repeatable)",
    )
    fetch.add_argument(
        "--mirror",
        default="",
        metavar="URL",
        help=f"base URL standing in for {UPSTREAM_ROOT} (a proxy or an internal copy with the same "
        f"<owner>/<repo>/<commit>/<path> layout); default ${MIRROR_ENV}",
    )
    fetch.set_defaults(func=lambda args: _fetch(args, transfer() if transfer else ((), None)))


def _list(args) -> int:
    from distalign.benchmark_data.fetch import listing

    print(listing(data_home()))
    return 0


def _fetch(args, transfer: TransferFetcher) -> int:
    from distalign.benchmark_data.fetch import fetch, selections

    transfer_tasks, fetch_transfer = transfer
    tasks = [name for name in args.names if name.partition(":")[0] in transfer_tasks]
    resources = [name for name in args.names if name not in tasks]
    selections(resources)  # a misspelt resource is an error before any transfer task is loaded
    sources = dict(item.partition("=")[::2] for item in args.hub_source)
    if (tasks or sources) and fetch_transfer is not None:
        fetch_transfer(tasks, data_home(), sources, offline())
    if resources:
        fetch(resources, data_home(), mirror=args.mirror or os.environ.get(MIRROR_ENV, ""), offline=offline())
    return 0
