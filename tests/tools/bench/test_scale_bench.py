"""``distalign bench scale`` on tiny sizes: every stage measured at every size, the table with a slope per stage,
the plot; the log-log slope itself; bad sizes refused by argparse naming the flag."""

from __future__ import annotations

import pytest

from distalign.cli import main
from distalign.tools.bench.scale import slope


def test_bench_scale_measures_every_stage_and_writes_the_table_and_plot(tmp_path, capsys):
    out = tmp_path / "scale"
    assert (
        main(
            [
                "bench",
                "scale",
                "--files",
                "5,20",
                "--pairs",
                "1e3,4e3",
                "--units",
                "100,400",
                "--workers",
                "2,4",
                "--output-dir",
                str(out),
            ]
        )
        == 0
    )
    table = (out / "scale.md").read_text()
    assert table in capsys.readouterr().out
    rows = [line.strip("| ").split(" | ") for line in table.splitlines() if line.startswith("| ") and " vs " in line]
    measured = [(r[0], r[1]) for r in rows if len(r) == 4]
    assert measured == [
        ("listing vs F files", "5"),
        ("listing vs F files", "20"),
        ("constraints vs N pairs", "1,000"),
        ("constraints vs N pairs", "4,000"),
        ("deal vs U units", "100"),
        ("deal vs U units", "400"),
        ("deal vs W workers", "2"),
        ("deal vs W workers", "4"),
        ("corpus handoff (driver) vs U units", "100"),
        ("corpus units cut (each worker) vs U units", "100"),
        ("corpus handoff (driver) vs U units", "400"),
        ("corpus units cut (each worker) vs U units", "400"),
        ("table streams vs N pairs", "1,000"),
        ("table streams vs N pairs", "4,000"),
        ("plan vs N pairs", "1,000"),
        ("plan vs N pairs", "4,000"),
        ("plan vs U units", "100"),
        ("plan vs U units", "400"),
        ("negatives vs W workers", "2"),
        ("negatives vs W workers", "4"),
    ]
    slopes = {r[0]: r[1:] for r in rows if len(r) == 3}
    assert set(slopes) == {name for name, _ in measured}
    assert float(slopes["negatives vs W workers"][1]) == pytest.approx(1.0, abs=0.1)  # one rank's memory ∝ W
    assert abs(float(slopes["plan vs N pairs"][1])) < 0.05  # where the pairs are, not the pairs (issue 47, item 2)
    assert abs(float(slopes["plan vs U units"][1])) < 0.05  # where the corpus listing is, not the units
    assert (out / "scale.png").read_bytes().startswith(b"\x89PNG")


def test_slope_is_the_log_log_exponent():
    assert slope([10, 100, 1000], [3, 30, 300]) == pytest.approx(1.0)
    assert slope([10, 100, 1000], [5, 5, 5]) == pytest.approx(0.0)
    assert slope([1, 2, 4], [1, 4, 16]) == pytest.approx(2.0)
    assert slope([10], [1]) is None and slope([1, 2], [0, 1]) is None


@pytest.mark.parametrize("value", ["0,10", "ten", ""])
def test_bad_sizes_are_refused_naming_the_flag(value, capsys):
    with pytest.raises(SystemExit):
        main(["bench", "scale", "--pairs", value])
    assert "--pairs" in capsys.readouterr().err
