"""Prepared inputs shared per content hash: the cache itself, and that the trials of a study (other subsets, other
language samples, the same seed) start from one world and one tiny model while another seed gets its own."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import QUICKSTART

from distalign.config import load_config
from distalign.preparation import inputs
from distalign.preparation.cache import COMPLETE_MARKER, cached_directory, content_key
from distalign.train.startup import StartupClock


def test_content_key_is_stable_and_changes_with_any_part():
    assert content_key({"a": 1, "b": [2, 3]}, 0) == content_key({"b": [2, 3], "a": 1}, 0)
    assert len({content_key({"a": 1}, 0), content_key({"a": 2}, 0), content_key({"a": 1}, 1)}) == 3


def test_a_directory_is_built_once_and_a_failed_build_leaves_nothing(tmp_path):
    built = []

    def build(directory: Path) -> None:
        built.append(directory)
        directory.mkdir()
        (directory / "x.txt").write_text("x")

    first = cached_directory(tmp_path, "thing", "k1", build)
    assert cached_directory(tmp_path, "thing", "k1", build) == first and len(built) == 1
    assert (first / "x.txt").read_text() == "x" and (first / COMPLETE_MARKER).exists()

    def broken(directory: Path) -> None:
        directory.mkdir()
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        cached_directory(tmp_path, "thing", "k2", broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thing-k1"]  # no half-built entry, no leftovers


def test_a_build_that_loses_the_race_uses_the_winners_directory(tmp_path):
    def build_while_another_run_finishes_first(directory: Path) -> None:
        cached_directory(tmp_path, "thing", "k", lambda d: (d.mkdir(), (d / "winner").touch()))
        directory.mkdir()
        (directory / "loser").touch()

    final = cached_directory(tmp_path, "thing", "k", build_while_another_run_finishes_first)
    assert (final / "winner").exists() and not (final / "loser").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thing-k"]


def test_trials_of_one_seed_share_the_world_and_the_tiny_model(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    builds = []
    real_build = inputs.build_tiny_model
    monkeypatch.setattr(inputs, "build_tiny_model", lambda *a, **k: builds.append(a[0]) or real_build(*a, **k))
    small = [
        "data.synthetic.num_concepts=120",
        "data.synthetic.sentences_per_language=200",
        "train.num_workers=1",
        "train.batch_sizes.constraints=8",
    ]
    prepared = {
        name: inputs.prepare_data(load_config(QUICKSTART, small + [f"run.name={name}", *extra]))
        for name, extra in [
            ("all", []),
            ("subset", ["data.max_constraints=50"]),
            ("sample", ["data.constraint_languages=[xa,xb]"]),
            ("seed1", ["train.seed=1"]),
        ]
    }
    assert len(prepared["subset"].constraints) == 50 < len(prepared["all"].constraints)
    assert prepared["all"].model_path == prepared["subset"].model_path == prepared["sample"].model_path
    assert prepared["seed1"].model_path != prepared["all"].model_path  # its own world, its own model
    assert len(builds) == 2
    worlds = {name: {s.lang: s.paths for s in p.corpus.sources} for name, p in prepared.items()}
    assert worlds["all"] == worlds["subset"] != worlds["seed1"]
    assert all(Path(path).is_relative_to(tmp_path / "runs" / "cache") for path in worlds["all"]["xa"])


def test_startup_phases_are_the_gaps_between_marks():
    clock = StartupClock({"start": 100.0})
    clock.marks |= {"prepare": 103.0, "ray": 104.5}
    clock.mark("prepare")  # already marked: kept
    assert clock.phases() == {"startup/prepare_s": 3.0, "startup/ray_s": 1.5, "startup/total_s": 4.5}
    assert clock.summary() == "4.5 s to the first step: prepare 3.0, ray 1.5"
