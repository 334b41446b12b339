"""The run's settings checked against its model on the driver, before Ray starts."""

import pytest
from conftest import QUICKSTART
from transfer_data import tiny_model

from distalign.config import ConfigError, load_config
from distalign.preparation import inputs


def test_a_max_seq_length_past_the_models_positions_names_both_settings_before_ray(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    model = tiny_model(tmp_path / "model")  # 64 positions
    config = load_config(
        QUICKSTART,
        [
            "data.synthetic.num_concepts=80",
            "data.synthetic.sentences_per_language=50",
            f"model.name_or_path={model}",
            "data.max_seq_length=100",
        ],
    )
    with pytest.raises(
        ConfigError,
        match=rf"data\.max_seq_length: 100 is more than the 64 tokens "
        rf"model\.name_or_path={model} takes",
    ):
        inputs.prepare_data(config)
