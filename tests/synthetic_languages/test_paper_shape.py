"""The bench's paper-shape presets (jobs/bench_presets/) and Table 8's checks (no training here)."""

import pandas as pd
import pytest
import torch

from distalign import cli
from distalign.synthetic_languages import benchmark
from distalign.synthetic_languages.benchmark import (
    alignment_checks,
    alignment_means_markdown,
    load_preset,
    markdown_table,
    training_config,
)
from distalign.synthetic_languages.transfer_study import cell_means
from distalign.train.engine import _optimizer_and_schedule

PAPER_SHAPE_TRAINING = [
    "train.lr_schedule=constant",
    "train.max_steps=8000",
    "train.checkpoint_every=8000",
    "train.log_every=500",
]


@pytest.mark.parametrize("preset", ["paper-shape", "paper-shape-transfer"])
def test_paper_shape_presets_pin_a_small_corpus_their_cells_three_seeds_and_a_constant_rate(tmp_path, preset):
    spec = load_preset(preset)
    assert (spec.max_sentences, spec.seeds, spec.overrides) == (5000, 3, PAPER_SHAPE_TRAINING)
    transfer = preset.endswith("transfer")
    # Table 8's rows with a check (Trans, Trans + Inv) for every objective; Table 3's Δ under inversion and
    # permutation, with translit's cells for the ρ, for the two objectives its checks compare
    assert spec.transformations == (
        ("translit", "translit_inv", "translit_perm") if transfer else ("translit", "translit_inv")
    )
    assert spec.objectives == (("mlm", "align") if transfer else ("mlm", "align", "xlm", "dict_mlm"))
    assert (spec.world, spec.transfer_tasks, spec.finetune_epochs) == (
        (500, ("udpos",), 15) if transfer else (0, (), 5)
    )
    paths = {
        "base": tmp_path / "en.txt",
        "derived": tmp_path / "xx.txt",
        "train_dict": tmp_path / "train.tsv",
        "eval_dict": tmp_path / "eval.tsv",
    }
    for path in paths.values():
        path.write_text("a\tb\n")
    train = training_config(spec, "translit", "mlm", paths, tmp_path).train
    assert (train.lr_schedule, train.max_steps, train.warmup_steps) == ("constant", 8000, 20)
    _, schedule = _optimizer_and_schedule(torch.nn.Linear(2, 2), train, train.max_steps)
    # the peak rate from the end of warm-up to the last step (the bench's linear decay would be at 1/8000 there)
    assert [schedule.lr_lambdas[0](step) for step in (0, 10, 20, 4000, 7999)] == [0.0, 0.5, 1.0, 1.0, 1.0]


def test_a_presets_values_are_the_commands_defaults_and_flags_given_win(monkeypatch):
    specs = []
    monkeypatch.setattr(benchmark, "run_bench", specs.append)
    assert (
        cli.main(
            [
                "bench",
                "synthetic",
                "--preset",
                "paper-shape",
                "--seeds",
                "1",
                "--objectives",
                "mlm,align",
                "train.max_steps=3000",
            ]
        )
        == 0
    )
    assert cli.main(["bench", "synthetic", "train.max_steps=3000"]) == 0
    preset, plain = specs
    assert (preset.seeds, preset.objectives, preset.max_sentences) == (1, ("mlm", "align"), 5000)
    assert preset.transformations == ("translit", "translit_inv")
    assert preset.overrides == [*PAPER_SHAPE_TRAINING, "train.max_steps=3000"]  # the command's own come last: win
    assert (plain.seeds, plain.max_sentences, plain.overrides) == (1, 20_000, ["train.max_steps=3000"])


def test_an_unknown_preset_is_refused_naming_the_presets(capsys):
    assert cli.main(["bench", "synthetic", "--preset", "paper"]) == 2
    assert "--preset paper: no such preset (paper-shape, paper-shape-transfer) or file" in capsys.readouterr().err


def runs(mlm_translit: float, mlm_inv: float) -> pd.DataFrame:
    rows = [
        ("translit", "mlm", 0, mlm_translit),
        ("translit", "mlm", 1, mlm_translit + 2),
        ("translit", "align", 0, 90.0),
        ("translit", "align", 1, 94.0),
        ("translit_inv", "mlm", 0, mlm_inv),
        ("translit_inv", "mlm", 1, mlm_inv),
        ("translit_inv", "align", 0, 80.0),
        ("translit_inv", "align", 1, 82.0),
    ]
    table = pd.DataFrame(rows, columns=["transformation", "objective", "seed", "alignment"])
    return table.assign(
        word_alignment_emb=50.0,
        word_alignment_best=60.0,
        word_alignment_best_layer=1,
        bli_mrr_best=0.5,
        bli_best_layer=1,
    )


def test_table8_checks_say_which_part_of_the_pattern_holds_on_the_seeds_means():
    cells = cell_means(runs(59.0, 0.2), benchmark.ALIGNMENT_COLUMNS)
    assert alignment_checks(cells) == [
        ("MLM on translit aligns: 60.0 ≥ 50 (paper 90.0)", True),
        ("MLM on translit_inv stays near chance: 0.2 ≤ 5 (paper 0.3)", True),
        ("translit: ALIGN 92.0 ≥ MLM 60.0", True),
        ("translit_inv: ALIGN 81.0 ≥ MLM 0.2", True),
    ]
    cells = cell_means(runs(3.0, 7.0), benchmark.ALIGNMENT_COLUMNS)
    assert [holds for _, holds in alignment_checks(cells)] == [False, False, True, True]
    text = alignment_means_markdown(cells)
    assert "| translit | mlm | 2 | 4.0 ± 1.4 | 90.0 |" in text
    assert "Table 8 pattern: DOES NOT HOLD (2 of 4 checks)" in text
    assert "FAILS: MLM on translit_inv stays near chance: 7.0 ≤ 5 (paper 0.3)" in text
    xlm_alone = cell_means(runs(3.0, 7.0).assign(objective="xlm"), benchmark.ALIGNMENT_COLUMNS)
    assert alignment_checks(xlm_alone) == []
    assert "Table 8 pattern: no check applies to these cells" in alignment_means_markdown(xlm_alone)


def test_table8_has_a_row_per_seed():
    text = markdown_table(runs(59.0, 0.2))
    assert "| translit | mlm | 0 | 59.0 | 90.0 |" in text and "| translit | mlm | 1 | 61.0 | 90.0 |" in text


def test_the_report_logs_table8_per_seed_and_per_cell_with_its_checks_to_the_parent_run(tmp_path):
    from types import SimpleNamespace

    from mlflow.tracking import MlflowClient

    from distalign.tracking import tracked_run

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    bench = SimpleNamespace(out_dir=tmp_path, tasks={}, probe=SimpleNamespace(tracking=SimpleNamespace(uri=uri)))
    with tracked_run(uri, "bench", "bench-synthetic", str(tmp_path), {}, {}) as parent:
        text = benchmark.report(bench, runs(59.0, 0.2).to_dict("records"), parent)
    assert "| translit | mlm | 1 | 61.0 | 90.0 |" in text and "Table 8 pattern: holds (4 of 4 checks)" in text
    client = MlflowClient(tracking_uri=uri)
    assert {a.path for a in client.list_artifacts(parent)} >= {"results.md", "results.csv"}
    metrics = client.get_run(parent).data.metrics
    assert metrics["bench/table8_pattern_holds"] == 1.0
    assert metrics["bench/translit/mlm/alignment"] == 60.0
    assert metrics["bench/translit/mlm/alignment_std"] == pytest.approx(2**0.5)
