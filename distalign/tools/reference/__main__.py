"""``python -m distalign.tools.reference [--out DIR]``: write the generated reference pages (default docs/reference)."""

from __future__ import annotations

import argparse
from pathlib import Path

from distalign.tools.reference import OUTPUT_DIR, write_pages


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m distalign.tools.reference", description=__doc__)
    parser.add_argument("--out", type=Path, default=OUTPUT_DIR, help=f"output directory (default {OUTPUT_DIR})")
    for path in write_pages(parser.parse_args().out):
        print(path)


if __name__ == "__main__":
    main()
