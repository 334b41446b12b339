"""The docs site: the generated reference pages are current, the site builds with no warning (mkdocs strict: broken
links, missing anchors, pages outside the nav), README's relative links point at files that exist, and the metric
names in code are those of the registry the metrics page is written from."""

from __future__ import annotations

import dataclasses
import logging
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from distalign.metric_names import TRAINING, family_of
from distalign.tools.reference import OUTPUT_DIR, render_pages
from distalign.tools.reference.source import checks, field_comments

REPO = Path(__file__).resolve().parents[1]
REGENERATE = "run `python -m distalign.tools.reference` (make docs-reference) and commit docs/reference/"


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return render_pages()


def test_generated_reference_pages_are_current(pages):
    stale = [
        name
        for name, content in pages.items()
        if not (REPO / OUTPUT_DIR / name).is_file() or (REPO / OUTPUT_DIR / name).read_text(encoding="utf-8") != content
    ]
    assert not stale, f"docs/reference/{', '.join(stale)} differ from what the code generates: {REGENERATE}"


def test_every_config_key_has_a_meaning(pages):
    """A key without a comment at its field would be a row with nothing to say: write one (the comment above the
    field, or at the end of its line)."""
    rows = [line.split(" | ") for line in pages["config.md"].splitlines() if line.startswith("| ") and "`" in line]
    meanings = {re.search("`([^`]+)`", cells[0]).group(1): cells[3].strip(" |") for cells in rows if len(cells) == 4}
    bare = [key for key, meaning in meanings.items() if not meaning or meaning.startswith("Checked:")]
    assert not bare, f"config keys without a description (add a comment at the field): {bare}"


def test_the_pages_name_every_key_command_and_metric(pages):
    config, cli, metrics = pages["config.md"], pages["cli.md"], pages["metrics.md"]
    for key in (
        "train.lr",
        "objectives.lexical.temperature",
        "data.synthetic.num_concepts",
        "eval.transfer.tasks",
        "study.grid",
        "study.search.scheduler",
        "study.language_samples.per_pair",
    ):
        assert f'<a id="{key}"></a>' in config, key
    assert '`"ddp"` or `"deepspeed"`' in config  # a Literal's allowed values
    assert "Checked: must be &gt;= 1" in config  # a require() check
    assert "### Corpus entries {#CorpusSource}" in config and "`hf_dataset`" in config
    for command in ("distalign train", "distalign static align", "distalign bench synthetic"):
        assert f"## `{command}`" in cli, command
    assert '| `--method {procrustes,vecmap}` | `"procrustes"` |' in cli
    assert "`Train/<objective>_loss`" in metrics and "`perf/step_ms`" in metrics


def _comment_example():
    @dataclasses.dataclass
    class Example:
        # above, line one
        # line two
        both: int = 1  # and its own
        bare: int = 2
        own: str = "x"  # only its own

        # a blank line above: still the block right above
        spaced: float = 0.5

    return Example


def test_field_comments_are_the_block_above_and_the_line_own():
    assert field_comments(_comment_example()) == {
        "both": "above, line one line two; and its own",
        "own": "only its own",
        "spaced": "a blank line above: still the block right above",
    }


def test_checks_are_read_from_require_calls_of_the_section():
    from distalign.objectives import mlm

    found = checks([(mlm, "objectives.mlm")])
    assert found["objectives.mlm.mask_prob"] == ["must be in (0, 1)"]


def _strict_build(site: Path, caplog) -> list[str]:
    """The warnings of a strict build of the site into ``site`` (none: it built)."""
    # a docs dependency only: `make gpu-check` collects this file where mkdocs is not installed
    from mkdocs.commands.build import build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    caplog.set_level(logging.WARNING, logger="mkdocs")
    try:
        build(load_config(str(REPO / "mkdocs.yml"), site_dir=str(site)))
    except Abort:
        return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return []


def test_site_builds_strict_with_every_link_and_anchor_resolved(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    warnings = _strict_build(tmp_path / "site", caplog)
    assert not warnings, "mkdocs build --strict:\n" + "\n".join(warnings)
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()
    assert_dotted_keys_are_found(tmp_path / "site")
    assert_mermaid_is_served_with_the_site(tmp_path / "site")
    assert "\\|" not in (tmp_path / "site" / "index.html").read_text(), "a table's escaped bar shows its backslash"


def test_the_pages_cite_no_issue_a_reader_cannot_see():
    """The project's issue numbers live in its tracker, not on GitHub: a page says what the issue was instead."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    cited = [
        f"{page.relative_to(REPO)}: {hit}"
        for page in pages
        for hit in re.findall(r"\bissues? #?\d+", page.read_text(encoding="utf-8"), flags=re.IGNORECASE)
    ]
    assert not cited, cited


def assert_dotted_keys_are_found(site: Path) -> None:
    """Search splits the pages' text and the query with the index's separator: a query's words must all be words
    of the key's own section (lunr finds whole words and their prefixes, not the middle of a word)."""
    import json

    index = json.loads((site / "search" / "search_index.json").read_text())
    separator = re.compile(index["config"]["separator"])

    def words(text: str) -> set[str]:  # the theme's tokenizer steps over the markup in the index's text
        return {word.lower() for word in separator.split(re.sub(r"<[^>]+>", " ", text)) if word}

    config_page = words(
        " ".join(doc["text"] for doc in index["docs"] if doc["location"].startswith("reference/config/"))
    )
    for query in ("zero_stage", "train.zero_stage", "objectives.lexical.temperature", "eval.bli_max_pairs"):
        assert words(query) <= config_page, f"search finds no {query!r} on the config reference page"


def assert_mermaid_is_served_with_the_site(site: Path) -> None:
    """The theme fetches mermaid from a CDN unless a page already has it: the site's own copy is on every page."""
    home = (site / "index.html").read_text()
    assert '<script src="assets/javascripts/mermaid.min.js"' in home
    assert (site / "assets" / "javascripts" / "mermaid.min.js").stat().st_size > 1_000_000


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.targets: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.targets += [value for name, value in attrs if name in ("href", "src") and value]


def relative_link_targets(markdown_text: str) -> list[str]:
    """The targets of the links and images of a Markdown text (inline, reference-style, raw HTML) that are paths
    in the repository: no URL, no mail address, no bare #anchor."""
    import markdown  # a docs dependency only: `make gpu-check` collects this file where it may be missing

    parser = _Links()
    parser.feed(markdown.markdown(markdown_text, extensions=["tables", "md_in_html"]))
    return [t for t in parser.targets if not re.match(r"[a-z][a-z0-9+.-]*:|#", t, re.I)]


def missing_targets(path: Path) -> list[str]:
    return [
        t
        for t in relative_link_targets(path.read_text(encoding="utf-8"))
        if not (path.parent / t.split("#")[0].split("?")[0]).exists()
    ]


def test_readme_links_point_at_files_that_exist():
    missing = missing_targets(REPO / "README.md")
    assert not missing, f"README.md links to paths that do not exist: {missing}"


def test_the_link_check_finds_a_missing_file(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "here.md").write_text("# here\n")
    (tmp_path / "README.md").write_text(
        "[a](docs/here.md#x) [b](docs/gone.md) [c](https://example.org/x.md) "
        "[d](#top) ![e](docs/img.png)\n\n[ref]: docs/ref.md\n\nsee [f][ref]\n"
        '<img src="docs/raw.png">\n'
    )
    assert missing_targets(tmp_path / "README.md") == ["docs/gone.md", "docs/img.png", "docs/ref.md", "docs/raw.png"]


def test_metric_names_built_in_code_are_registered():
    """The names the training code builds match the registry's training families (a real run's names are
    compared in tests/train/test_training_integration.py)."""
    from distalign.eval.mlm_loss import MLM_LOSS_METRIC
    from distalign.eval.selection import SELECTION_METRIC
    from distalign.train.final_scores import TEST_METRIC, TEST_STEP
    from distalign.train.startup import StartupClock
    from distalign.train.step_timing import Window, totals, window_metrics

    clock = StartupClock()
    for phase in ("imports", "prepare", "first_step"):
        clock.mark(phase)
    perf = window_metrics(
        Window(
            steps=2,
            step_s=1.0,
            phase_s={"data_wait": 0.1, "optimizer": 0.2},
            sequences=4,
            tokens=64,
            padding=8,
            flops=1e9,
        ),
        peak=1e12,
    )
    names = [
        MLM_LOSS_METRIC,
        SELECTION_METRIC,
        TEST_METRIC,
        TEST_STEP,
        *clock.phases(),
        *perf,
        *totals(perf, world_size=2),
    ]
    unregistered = [name for name in names if family_of(name, (TRAINING,)) is None]
    assert not unregistered, f"add these to distalign/metric_names.py: {unregistered}"
    assert family_of("Train/new_thing", (TRAINING,)) is None  # the registry is no catch-all
