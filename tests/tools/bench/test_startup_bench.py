"""``distalign bench startup``'s table: each round's ratio to its own floor and its load, beside the medians."""

from distalign.tools.bench.startup_bench import format_table, medians


def test_each_round_keeps_its_ratio_to_its_own_floor_and_its_load():
    rounds = [
        {"floor_s": 20.0, "total_s": 24.0, "prepare": 1.0, "ratio": 1.2, "load": 3.0, "wall_s": 30.0},
        {"floor_s": 40.0, "total_s": 44.0, "prepare": 2.0, "ratio": 1.1, "load": 9.0, "wall_s": 50.0},
        {"floor_s": 30.0, "total_s": 39.0, "prepare": 3.0, "ratio": 1.3, "load": 6.0, "wall_s": 45.0},
    ]
    report = {
        "date": "d",
        "machine": "m",
        "ray": "r",
        "load_average_1m": 6.0,
        "rounds": rounds,
        "median": medians(rounds),
    }
    lines = format_table(report).splitlines()
    assert "| ratio to the floor | 1.20 | 1.10 | 1.30 | 1.20 |" in lines
    assert "| load average (1 min) | 3.0 | 9.0 | 6.0 | 6.0 |" in lines
    assert "|   prepare | 1.0 | 2.0 | 3.0 | 2.0 |" in lines
    assert lines[-1] == "ratio to the floor (medians): 1.30x"  # 39 / 30: the medians' own ratio
