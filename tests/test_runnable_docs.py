"""The guides' examples run: every fenced block marked runnable in README.md, docs/getting-started.md and
docs/guides/ is executed (commands) or loaded (YAML) here, on the embedded defaults.

The marker is an HTML comment on the line right before the fence (invisible on GitHub and in the site):

    <!-- runnable: shell -->                  distalign commands, run in order in a working copy of the repository
    <!-- runnable: config my.yaml -->          an experiment config (or part of one), written to my.yaml there,
                                               loaded by distalign's config loader and its inputs read as a run
                                               reads them before Ray starts
    <!-- runnable: study tuning/my.yaml -->    a Tune study file, loaded by the study loader

Blocks that need a cluster, a GPU, the Hugging Face Hub or data the repository does not ship stay unmarked; each
page says why next to them. The working copy holds jobs/ and tuning/ and the local files the own-data example
names, written here from a generated world (en, de). Training commands run as written plus the smallest settings
(a few steps, evaluation only at the start and end), on the shared Ray cluster.
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", REPO / "docs" / "getting-started.md", *sorted((REPO / "docs" / "guides").rglob("*.md"))]
MARKER = re.compile(r"<!-- runnable: (shell|config|study)(?: (\S+))? -->")
KINDS_WITH_FILE = ("config", "study")

# Appended to every `distalign train` of a marked block: the command as written, shrunk to seconds (the
# documented settings still parse and validate; later overrides win)
SMALLEST = [
    "train.max_steps=2",
    "train.checkpoint_every=2",
    "train.log_every=1",
    "train.warmup_steps=1",
    "eval.every=0",
    "eval.bli_max_pairs=40",
]


@dataclass(frozen=True)
class Block:
    page: str  # path relative to the repository, for messages
    line: int  # the fence's line
    kind: str  # shell, config or study
    file: str  # where a YAML block is written in the working copy ("" for shell)
    text: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.kind}{' ' + self.file if self.file else ''})"


def marked_blocks() -> list[Block]:
    blocks = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            marker = MARKER.fullmatch(line.strip())
            if not marker:
                continue
            kind, file = marker.group(1), marker.group(2) or ""
            where = f"{page.relative_to(REPO)}:{i + 1}"
            assert i + 1 < len(lines) and lines[i + 1].startswith("```"), (
                f"{where}: a runnable marker must be right before a fenced block"
            )
            assert (kind in KINDS_WITH_FILE) == bool(file), (
                f"{where}: {kind} blocks "
                f"{'name the file they are written to' if kind in KINDS_WITH_FILE else 'take no file name'}"
            )
            end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
            blocks.append(Block(str(page.relative_to(REPO)), i + 2, kind, file, "\n".join(lines[i + 2 : end]) + "\n"))
    return blocks


def commands(block: Block) -> list[list[str]]:
    """The block's commands as argument lists: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n", " ", block.text)
    found = [shlex.split(line, comments=True) for line in joined.splitlines()]
    return [words for words in found if words]


def test_the_marker_convention_is_used():
    """The own-data example (README and guide) and the tour's commands are among the marked blocks."""
    blocks = marked_blocks()
    pages = {(b.page, b.kind) for b in blocks}
    assert {
        ("README.md", "config"),
        ("README.md", "shell"),
        ("docs/guides/own-data.md", "config"),
        ("docs/guides/own-data.md", "study"),
        ("docs/getting-started.md", "shell"),
    } <= pages
    texts: dict[str, str] = {}
    for block in blocks:
        if block.file:  # one file, one content: every YAML block is written before any block runs
            assert texts.setdefault(block.file, block.text) == block.text, f"{block}: another block writes {block.file}"
        if block.kind == "shell":
            for words in commands(block):
                assert words[0] == "distalign", (
                    f"{block}: a runnable shell block holds distalign commands only, not {shlex.join(words)!r}"
                )


def own_data_files(root: Path) -> None:
    """The local files the own-data example names: two corpora, constraints, a training dictionary (the
    constraints' en-de pairs) and a held-out test dictionary, from a generated en/de world."""
    import pyarrow.parquet as pq

    from distalign.data.synthetic import SyntheticConfig, generate_world

    world = generate_world(
        SyntheticConfig(languages=["en", "de"], num_concepts=80, sentences_per_language=300), root / "world"
    )
    (root / "corpora" / "en").mkdir(parents=True)
    shutil.copy(world.corpora["en"], root / "corpora" / "en" / "part-0.txt")
    shutil.copy(world.corpora["de"], root / "corpora" / "de-0.txt")
    shutil.copy(world.constraints, root / "constraints.parquet")
    (root / "dict").mkdir()
    shutil.copy(world.eval_dictionaries[0].path, root / "dict" / "en-de.test.tsv")
    pairs = pq.read_table(world.constraints).to_pylist()
    (root / "dict" / "en-de.train.tsv").write_text(
        "".join(f"{p['word1']}\t{p['word2']}\n" for p in pairs if (p["lang1"], p["lang2"]) == ("en", "de"))
    )


@pytest.fixture(scope="module")
def working_copy(tmp_path_factory, distalign_home):
    """A working directory with the repository's configs and studies and the own-data example's files."""
    root = tmp_path_factory.mktemp("working-copy")
    for folder in ("jobs", "tuning"):
        shutil.copytree(REPO / folder, root / folder)
    own_data_files(root)
    return root


def write_yaml_blocks(root: Path) -> None:
    for block in marked_blocks():
        if block.kind in KINDS_WITH_FILE:
            (root / block.file).parent.mkdir(parents=True, exist_ok=True)
            (root / block.file).write_text(block.text)


def load_yaml_block(block: Block, root: Path) -> None:
    from distalign.config import load_config

    if block.kind == "config":  # read as a run reads its inputs before Ray: files, formats, one storage
        from distalign.preparation.inputs import prepare_data

        prepare_data(load_config(root / block.file))
    else:
        from distalign.studies.study import load_study

        load_study(root / block.file)


@pytest.mark.parametrize("block", [b for b in marked_blocks() if b.kind in KINDS_WITH_FILE], ids=str)
def test_a_marked_yaml_block_loads(block, working_copy, monkeypatch):
    monkeypatch.chdir(working_copy)
    write_yaml_blocks(working_copy)
    load_yaml_block(block, working_copy)


def run_command(words: list[str]) -> int:
    from distalign import cli

    extra = SMALLEST if words[1:2] == ["train"] else []
    return cli.main(words[1:] + extra)


@pytest.mark.parametrize("block", [b for b in marked_blocks() if b.kind == "shell"], ids=str)
def test_a_marked_shell_block_runs(block, working_copy, monkeypatch, ray_local, capsys):
    monkeypatch.chdir(working_copy)
    write_yaml_blocks(working_copy)
    for words in commands(block):
        try:
            code = run_command(words)
        except SystemExit as exit_:  # argparse's way out of --help
            code = exit_.code
        assert code == 0, f"{block}: `{shlex.join(words)}` exited {code}\n{capsys.readouterr().err[-2000:]}"
