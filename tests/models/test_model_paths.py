"""A model path that is a file or a folder without config.json: a clear error naming the path, in train, eval and
transfer alike, before anything is loaded (transformers would take it for a hub name: HFValidationError)."""

import pytest

from conftest import QUICKSTART
from distalign.cli import main
from distalign.config import ConfigError, load_config


@pytest.fixture
def snapshot_file(tmp_path):
    path = tmp_path / "checkpoint_000001" / "checkpoint_manager_snapshot.json"
    path.parent.mkdir()
    path.write_text("{}")
    return path


def test_train_config_names_a_model_file(snapshot_file):
    with pytest.raises(ConfigError, match=r"model\.name_or_path: .*checkpoint_manager_snapshot\.json is a file, "
                                          r"not a model directory; a model directory holds config\.json"):
        load_config(QUICKSTART, [f"model.name_or_path={snapshot_file}"])


def test_train_config_names_a_folder_without_config_json(tmp_path):
    with pytest.raises(ConfigError, match=r"model\.name_or_path: .* has no config\.json"):
        load_config(QUICKSTART, [f"model.name_or_path={tmp_path}"])


@pytest.mark.parametrize("command", [["transfer", "{model}", "--data-dir", "{data}", "--no-mlflow"],
                                     ["eval", "--model", "{model}", "--eval-dir", "{data}", "--no-mlflow"]])
def test_eval_and_transfer_name_a_model_file(command, snapshot_file, tmp_path, capsys):
    args = [part.format(model=snapshot_file, data=tmp_path) for part in command]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{snapshot_file} is a file, not a model directory" in err and "Traceback" not in err
