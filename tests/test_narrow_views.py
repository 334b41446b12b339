"""Narrow views of the experiment config: the plugins and stages below it (objectives, data, eval, models) never
name ``ExperimentConfig`` (an objective gets its section and the run's ``RunFacts``); checks a higher layer owns
run inside ``load_config`` once registered (``distalign.config.register_section_check``). No Ray here."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import REPO

from distalign.config import ConfigError, ExperimentConfig, load_config, schema
from distalign.data.run_facts import RunFacts
from distalign.errors import require

QUICKSTART = str(REPO / "jobs" / "configs" / "quickstart.yaml")
NARROW_ROOMS = ("objectives", "data", "eval", "models")


@pytest.mark.parametrize("room", NARROW_ROOMS)
def test_the_rooms_below_the_run_never_take_the_whole_config(room):
    offenders = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "distalign" / room).rglob("*.py"))
        if "ExperimentConfig" in path.read_text()  # as issue 48's `grep -rn ExperimentConfig` reads them
    ]
    assert not offenders, f"these modules use ExperimentConfig; pass the sections they read instead: {offenders}"


def test_run_facts_are_the_configs_values():
    config = load_config(QUICKSTART, ["train.seed=7", "train.static_batch_size=48", "data.pack_sequences=false"])
    facts = config.run_facts()
    assert (facts.seed, facts.static_batch_size, facts.pack_sequences) == (7, 48, False)
    assert facts.tiny_model_layers == config.model.tiny.num_layers and not facts.has_parallel_data
    with pytest.raises(dataclasses.FrozenInstanceError):  # a plugin reads them, never changes the run
        facts.seed = 8  # type: ignore[misc]
    assert isinstance(facts, RunFacts) and facts == config.run_facts()


def test_objective_checks_read_the_run_facts():
    """objectives.static's Deep CCA needs more words per batch than directions (``train.static_batch_size``), and
    the targets it derives from the tiny model a layer the model has (``model.tiny.num_layers``)."""
    static = ["objectives.static.weight=1", "objectives.static.loss=dcca", "objectives.static.dcca_k=8"]
    overrides = static + ["objectives.static.extract_layer=-1", "model.tiny.num_layers=2"]
    load_config(QUICKSTART, overrides + ["train.static_batch_size=9"])
    with pytest.raises(ConfigError, match=r"train\.static_batch_size: must exceed objectives\.static\.dcca_k"):
        load_config(QUICKSTART, overrides + ["train.static_batch_size=8"])
    with pytest.raises(ConfigError, match=r"objectives\.static\.extract_layer: must be in \[-4, 3\] .*num_layers=3"):
        load_config(QUICKSTART, static + ["objectives.static.extract_layer=4", "model.tiny.num_layers=3"])


def test_a_registered_section_check_runs_in_load_config_after_the_configs_own(monkeypatch):
    seen = []

    def check(config: ExperimentConfig) -> None:
        seen.append(config.run.name)
        require(config.eval.every != 7, "eval.every", "may not be 7 (a higher layer's rule)")

    monkeypatch.setitem(schema.SECTION_CHECKS, "eval.every", check)
    load_config(QUICKSTART, ["run.name=fine"])
    with pytest.raises(ConfigError, match=r"eval\.every: may not be 7 \(a higher layer's rule\)"):
        load_config(QUICKSTART, ["eval.every=7"])
    # a config whose own values are wrong is not handed to it (it may read any section)
    with pytest.raises(ConfigError, match=r"train\.lr: must be > 0") as raised:
        load_config(QUICKSTART, ["eval.every=7", "train.lr=0", "run.name=wrong"])
    assert "eval.every" not in str(raised.value) and seen == ["fine", "quickstart"]
