"""The transfer command ``distalign train`` prints for a synthetic world with transfer tasks: it parses, and
its spec reads the world's files (no Ray)."""

import shlex

import pytest

from distalign.cli import build_parser
from distalign.config import ConfigError, load_config
from distalign.train.run_summary import synthetic_transfer_command
from distalign.transfer.data import read_split
from distalign.transfer.tasks.registry import TRANSFER_TASKS
from distalign.transfer.zero_shot import spec_from_args, target_languages

QUICKSTART = "jobs/configs/quickstart.yaml"


def test_printed_command_points_at_the_world_tasks(tmp_path):
    small = ["data.synthetic.num_concepts=40", "data.synthetic.sentences_per_language=20", f"data.cache_dir={tmp_path}"]
    assert synthetic_transfer_command(load_config(QUICKSTART, small), "/runs/q/checkpoint_1") == ""
    config = load_config(QUICKSTART, small + ["data.synthetic.transfer_examples=40"])
    command = synthetic_transfer_command(config, "/runs/q/checkpoint_1")
    argv = shlex.split(command)
    assert argv[:3] == ["distalign", "transfer", "/runs/q/checkpoint_1"]
    spec = spec_from_args(build_parser().parse_args(argv[1:]))
    assert spec.model == "/runs/q/checkpoint_1" and spec.source == "xa" and spec.tasks == ("udpos", "pawsx")
    assert spec.data_dir.startswith(str(tmp_path))
    for name in spec.tasks:
        assert target_languages(spec, name) == ("xb", "xc")
        for lang, split in (("xa", "train"), ("xa", "validation"), ("xc", "test")):
            examples, _ = read_split(TRANSFER_TASKS[name], spec.data_dir, lang, split)
            assert len(examples) == 40


def test_negative_count_names_the_key():
    with pytest.raises(ConfigError, match=r"data\.synthetic\.transfer_examples"):
        load_config(QUICKSTART, ["data.synthetic.transfer_examples=-1"])
