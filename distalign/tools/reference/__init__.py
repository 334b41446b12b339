"""The reference pages of the docs site, generated from the code: ``python -m distalign.tools.reference``
(``make docs-reference``) writes them to ``docs/reference/``; ``tests/test_docs.py`` fails when the committed
pages differ from what the code generates.

- ``config.md``: every key of a training config and a study file (``config_page``, from the typed schema)
- ``cli.md``: every command, sub-command and flag (``cli_page``, from the argparse parser)
- ``metrics.md``: the MLflow metric names (``metrics_page``, from ``distalign.metric_names``)
"""

from __future__ import annotations

from pathlib import Path

OUTPUT_DIR = Path("docs") / "reference"  # under the repository root


def render_pages() -> dict[str, str]:
    """File name -> content of every generated page."""
    from distalign.tools.reference import cli_page, config_page, metrics_page

    return {"config.md": config_page.render(), "cli.md": cli_page.render(), "metrics.md": metrics_page.render()}


def write_pages(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, content in render_pages().items():
        (out_dir / name).write_text(content, encoding="utf-8")
        written.append(out_dir / name)
    return written
