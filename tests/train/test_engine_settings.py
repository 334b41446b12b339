"""A user's DeepSpeed settings (file, then mapping) laid over distalign's, nested keys merged."""

from __future__ import annotations

import json

import pytest
from conftest import QUICKSTART

from distalign.config import ConfigError, load_config
from distalign.data.stream_plugins import STREAMS
from distalign.train.engine import deepspeed_settings


def test_user_deepspeed_settings_merge_over_the_defaults(tmp_path):
    (tmp_path / "ds.json").write_text(
        json.dumps({"zero_optimization": {"overlap_comm": True, "reduce_bucket_size": 5e7}, "gradient_clipping": 0.5})
    )
    config = load_config(
        QUICKSTART,
        [
            "train.engine=deepspeed",
            "train.zero_stage=2",
            f"train.deepspeed_config_file={tmp_path / 'ds.json'}",
            'train.deepspeed_config={"zero_optimization": {"offload_optimizer": {"device": "cpu"}}, '
            '"gradient_clipping": 2.0}',
        ],
    )
    settings = deepspeed_settings(config.train)
    assert settings["zero_optimization"] == {
        "stage": 2,
        "overlap_comm": True,
        "reduce_bucket_size": 5e7,
        "offload_optimizer": {"device": "cpu"},
    }
    assert settings["gradient_clipping"] == 2.0  # the mapping wins over the file, the file over the defaults
    assert settings["train_micro_batch_size_per_gpu"] == STREAMS["constraints"].batch_size(config.train)
    assert deepspeed_settings(load_config(QUICKSTART, ["train.engine=deepspeed"]).train)["gradient_clipping"] == 1.0


def test_deepspeed_settings_need_the_deepspeed_engine_and_an_existing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"train\.deepspeed_config: needs train\.engine=deepspeed"):
        load_config(QUICKSTART, ['train.deepspeed_config={"gradient_clipping": 2.0}'])
    with pytest.raises(ConfigError, match=r"train\.deepspeed_config_file: file not found"):
        load_config(QUICKSTART, ["train.engine=deepspeed", f"train.deepspeed_config_file={tmp_path / 'no.json'}"])
