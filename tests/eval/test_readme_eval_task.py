"""The docs' "Adding an evaluation task" (docs/explanations/architecture.md), run as written: its code block is executed
here, its class registered under ``pair_cosine`` for the test, scored against a hand computation and run by
``distalign eval`` over Ray, with no other file touched."""

from __future__ import annotations

import re
import types
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from test_runner import DE, EN, TINY, write_eval_dir

import distalign.eval.local_evaluation as in_process
from distalign.cli import main
from distalign.eval.checkpoint_eval import write_reports
from distalign.eval.local_evaluation import evaluate_locally
from distalign.eval.suite import build_tasks
from distalign.eval.suite_spec import SuiteSpec
from distalign.eval.tasks.registry import EVAL_TASKS
from distalign.models.loading import build_tiny_model

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "explanations" / "architecture.md"


def readme_section() -> str:
    return GUIDE.read_text().split("### Adding an evaluation task", 1)[1].split("\n## ", 1)[0]


def readme_code() -> str:
    """The first python block of the docs' section "Adding an evaluation task", indentation removed."""
    block = re.search(r"```python\n(.*?)```", readme_section(), re.S).group(1)
    indent = min(len(line) - len(line.lstrip()) for line in block.splitlines() if line.strip())
    return "\n".join(line[indent:] for line in block.splitlines())


@pytest.fixture
def pair_cosine(monkeypatch):
    # a module of its own that is not importable: Ray ships the class to its workers by value
    module = types.ModuleType("readme_pair_cosine")
    exec(
        compile(
            readme_code(), "docs/explanations/architecture.md (Adding an evaluation task)", "exec", dont_inherit=True
        ),
        module.__dict__,
    )
    name, class_name = re.search(r'registry\.py`: `"(\w+)": (\w+),`', readme_section()).groups()
    assert name == "pair_cosine"  # the docs' registry line, as written
    monkeypatch.setitem(EVAL_TASKS, name, getattr(module, class_name))
    return getattr(module, class_name)


def test_the_readme_task_reads_its_pairs_and_scores_a_hand_computation(pair_cosine, tmp_path, monkeypatch):
    eval_dir = write_eval_dir(tmp_path / "eval")
    suite = SuiteSpec(eval_dir=str(eval_dir), tasks=("pair_cosine",), bli_pairs=("de-en",), max_queries=4)
    [task] = build_tasks(suite)
    assert (task.task, task.pair) == ("pair_cosine", "de-en")
    assert task.pairs == [(d.capitalize(), e) for d, e in zip(DE[:4], EN[:4])]  # G-BLI en-de read swapped
    # German word i = e0 at layer 0 and e0 + e1 at layer 1; English = e0 + i e1 at both layers:
    # cos at layer 0 = 1 / sqrt(1 + i^2), at layer 1 = (1 + i) / (sqrt 2 sqrt(1 + i^2))
    german = {d.capitalize(): torch.tensor([[1.0, 0.0], [1.0, 1.0]]) for d in DE}
    english = {e: torch.tensor([[1.0, float(i)], [1.0, float(i)]]) for i, e in enumerate(EN)}

    def encode(model, tokenizer, text_set, settings=None, cache=None):
        table = german if text_set.lang == "de" else english
        return torch.stack([table[t] for t in text_set.texts], dim=1)

    monkeypatch.setattr(in_process, "encode_text_set", encode)
    fake_model = SimpleNamespace(masked_lm=SimpleNamespace(config=SimpleNamespace(num_hidden_layers=1)))
    rows = evaluate_locally(fake_model, None, [task])
    by_layer = {r["layer"]: r["value"] for r in rows if r["metric"] == "cosine"}
    layer0 = [1.0, 0.7071068, 0.4472136, 0.3162278]
    layer1 = [0.7071068, 1.0, 0.9486833, 0.8944272]
    assert by_layer == pytest.approx({0: sum(layer0) / 4, 1: sum(layer1) / 4})
    files = write_reports(pd.DataFrame(rows), [task], tmp_path / "out")
    assert tmp_path / "out" / "heatmap_pair_cosine.png" in files  # its report, from its main metric


def test_distalign_eval_runs_the_readme_task_over_ray(ray_local, pair_cosine, tmp_path, capsys):
    model_dir = build_tiny_model(tmp_path / "model", [" ".join(EN), " ".join(DE)] * 20, TINY)
    out = tmp_path / "out"
    code = main(
        [
            "eval",
            "--model",
            str(model_dir),
            "--eval-dir",
            str(write_eval_dir(tmp_path / "eval")),
            "--tasks",
            "bli,pair_cosine",
            "--bli-pairs",
            "de-en",
            "--output-dir",
            str(out),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-mlflow",
            "--cpus-per-task",
            "0.5",
        ]
    )
    assert code == 0
    # the German test words are one set for both tasks; English: BLI's vocabulary file and the pairs' own targets
    assert "3 text sets to encode" in capsys.readouterr().out
    table = pd.read_csv(out / "results.csv")
    cosine = table[(table["task"] == "pair_cosine") & (table["pair"] == "de-en")]
    assert sorted(cosine["layer"]) == list(range(TINY.num_layers + 1)) and set(cosine["metric"]) == {"cosine"}
    assert (out / "heatmap_pair_cosine.png").is_file()
