"""``distalign data fetch xnli:en,de``: a transfer task's Hub data set saved into the data home and read back by
``distalign transfer`` with no --data-dir; offline, what is missing is named. The "Hub" is a local folder in the
Hub's layout (parquet files per config and split, the configs in README.md), given with --hub-source: datasets
loads it as it loads a Hub repository."""

from pathlib import Path

import pytest
from datasets import Dataset
from transfer_data import FEATURES, rows

from distalign.cli import build_parser, main
from distalign.errors import InputError
from distalign.transfer.data import read_split
from distalign.transfer.tasks.pair import XNLITask
from distalign.transfer.zero_shot import spec_from_args, validate

SPLITS = ("train", "validation", "test")


def hub_copy(root: Path, langs=("en", "de")) -> Path:
    """xnli as the Hub serves it: <config>/<split>-00000-of-00001.parquet, the configs declared in README.md."""
    for lang in langs:
        (root / lang).mkdir(parents=True)
        for seed, split in enumerate(SPLITS):
            Dataset.from_dict(rows("xnli", lang, 6, seed), features=FEATURES["xnli"]).to_parquet(
                str(root / lang / f"{split}-00000-of-00001.parquet")
            )
    configs = "".join(
        f"- config_name: {lang}\n  data_files:\n"
        + "".join(f"  - split: {split}\n    path: {lang}/{split}-*\n" for split in SPLITS)
        for lang in langs
    )
    (root / "README.md").write_text(f"---\nconfigs:\n{configs}---\n")
    return root


@pytest.fixture
def home(tmp_path, monkeypatch):
    for name in ("DISTALIGN_OFFLINE", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DISTALIGN_DATA", str(tmp_path / "home"))
    return tmp_path / "home"


def test_fetched_task_is_saved_whole_and_read_back_by_transfer_without_data_dir(tmp_path, home, capsys):
    hub = hub_copy(tmp_path / "hub-xnli")
    assert main(["data", "fetch", "xnli:en,de", "--hub-source", f"xnli={hub}"]) == 0
    folder = home / "transfer" / "xnli"
    assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == ["de", "en"]  # no partial or cache folder left
    assert "xnli: " + str(folder / "de") + f" saved from {hub}/de" in capsys.readouterr().out
    # transfer, with neither --data-dir nor --hub, reads the data home's transfer folder
    args = build_parser(command="transfer").parse_args(["transfer", "some-model", "--tasks", "xnli"])
    spec = spec_from_args(args)
    assert spec.data_dir == str(home / "transfer")
    examples, report = read_split(XNLITask, spec.data_dir, "de", "test")
    assert [e.label for e in examples] == rows("xnli", "de", 6, 2)["label"] and report.malformed == 0
    assert main(["data", "fetch", "xnli:de", "--hub-source", f"xnli={hub}"]) == 0  # there already: not loaded again
    assert "there already" in capsys.readouterr().out
    assert main(["data", "list"]) == 0
    assert f"transfer tasks saved in {home / 'transfer'}:\n  xnli: de, en\n" in capsys.readouterr().out


@pytest.mark.parametrize("switch", ["DISTALIGN_OFFLINE", "HF_DATASETS_OFFLINE"])
def test_offline_names_what_is_missing_and_loads_nothing(tmp_path, home, monkeypatch, capsys, switch):
    monkeypatch.setenv(switch, "1")
    assert main(["data", "fetch", "xnli:de", "pawsx:fr"]) != 0
    err = capsys.readouterr().err
    assert f"{home / 'transfer' / 'xnli' / 'de'} (xnli/de)" in err and f"{home / 'transfer' / 'pawsx' / 'fr'}" in err
    assert "`distalign data fetch xnli:de pawsx:fr`" in err and not (home / "transfer").exists()


def test_without_fetched_data_transfer_names_the_fetch_command(home):
    args = build_parser(command="transfer").parse_args(["transfer", "some-model", "--tasks", "xnli"])
    spec = spec_from_args(args)
    assert spec.data_dir == ""
    with pytest.raises(Exception, match="distalign data fetch xnli:en,LANG"):
        validate(spec)
    with pytest.raises(InputError, match="`distalign data fetch xnli:de`"):
        read_split(XNLITask, str(home), "de", "test")


def test_a_task_without_languages_or_an_unloadable_source_is_one_line(tmp_path, home, capsys):
    assert main(["data", "fetch", "udpos"]) != 0
    assert "udpos: name its languages, e.g. `distalign data fetch udpos:en,de`" in capsys.readouterr().err
    assert main(["data", "fetch", "xnli:fr", "--hub-source", f"xnli={hub_copy(tmp_path / 'hub')}"]) != 0
    err = capsys.readouterr().err
    assert "xnli: cannot load" in err and "HF_ENDPOINT" in err
    assert not (home / "transfer" / "xnli" / "fr").exists()
    assert main(["data", "fetch", "pawsx:de", "--hub-source", f"xnli={tmp_path / 'hub'}"]) != 0  # unused: an error
    assert "--hub-source xnli=" in capsys.readouterr().err
    assert main(["data", "fetch", "xnli:de", "gbli"]) != 0  # a misspelt resource: nothing loaded
    assert "no benchmark resource 'gbli'" in capsys.readouterr().err
    assert not (home / "transfer" / "xnli" / "de").exists()


def test_semeval17_says_where_to_download_it(home, capsys):
    assert main(["data", "fetch", "semeval17"]) != 0
    err = capsys.readouterr().err
    assert "https://alt.qcri.org/semeval2017/task2/" in err and "eval/semeval2017/subtask2-crosslingual/" in err
