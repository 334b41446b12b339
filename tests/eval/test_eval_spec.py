"""``distalign eval --spec FILE [key=value ...]``: the spec read by the loader of training configs (no Ray)."""

from pathlib import Path

import pytest
import yaml
from test_runner import write_eval_dir

from distalign.cli import build_parser, main
from distalign.config import ConfigError
from distalign.errors import InputError
from distalign.eval.checkpoint_eval import spec_from_args
from distalign.eval.eval_spec import EvalSpec, EvalTrackingConfig
from distalign.eval.suite import build_tasks
from distalign.eval.suite_spec import SuiteSpec


def spec_of(*argv: str) -> EvalSpec:
    return spec_from_args(build_parser().parse_args(["eval", *argv]))


def write_spec(tmp_path, data: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_flags_alone_give_the_defaults_of_the_flags(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    spec = spec_of("--model", "xlm-roberta-base")
    assert spec == EvalSpec(model="xlm-roberta-base", suite=SuiteSpec())  # eval_dir "": the data home's eval/
    assert spec.suite.tasks == ("bli", "xlsim", "tatoeba") and spec.suite.vocab_size == 100_000
    assert spec.layer is None and spec.cpus_per_task == 1.0 and spec.tracking == EvalTrackingConfig()


def test_spec_file_then_flags_then_overrides(tmp_path):
    eval_dir = write_eval_dir(tmp_path / "eval")
    path = write_spec(
        tmp_path,
        {
            "checkpoint": "runs/x/checkpoint_000",
            "suite": {
                "eval_dir": "eval",
                "tasks": ["bli", "word_alignment"],
                "bli_pairs": ["de-en"],
                "dictionaries": [["en", "de", "eval/bli/gbli/en-de/yacle.test.freq.2k.en-de.tsv"]],
                "max_queries": 5,
            },
            "layer": -1,
            "tracking": {"experiment": "mine"},
        },
    )
    spec = spec_of(
        "--spec",
        str(path),
        "--model",
        "m",
        "--similarity",
        "cosine,csls",
        "--no-mlflow",
        "suite.max_queries=7",
        "tracking.experiment=theirs",
    )
    assert (spec.model, spec.checkpoint) == ("m", "")  # a model on the command line replaces the spec's checkpoint
    assert spec.suite.eval_dir == str(eval_dir)  # relative to the spec file
    assert spec.suite.dictionaries == (("en", "de", str(eval_dir / "bli/gbli/en-de/yacle.test.freq.2k.en-de.tsv")),)
    assert spec.suite.tasks == ("bli", "word_alignment") and spec.suite.similarities == ("cosine", "csls")
    assert spec.suite.max_queries == 7 and spec.layer == -1
    assert spec.tracking == EvalTrackingConfig(experiment="theirs", enabled=False)
    tasks = build_tasks(spec.suite)
    assert [(t.task, t.pair) for t in tasks] == [
        ("bli", "de-en"),
        ("bli_csls", "de-en"),
        ("bli", "en-de"),
        ("bli_csls", "en-de"),
        ("word_alignment", "de-en"),
        ("word_alignment", "en-de"),
    ]
    assert len(tasks[0].queries) == 7  # max_queries from the override, not the file's 5


def test_unknown_spec_key_names_the_dotted_key(tmp_path, capsys):
    path = write_spec(tmp_path, {"model": "m", "suite": {"bli_pair": ["de-en"]}})
    with pytest.raises(
        ConfigError,
        match=r"unknown key 'suite\.bli_pair' \(allowed here: bli_pairs, bli_ranking, "
        r"dictionaries, dictionary_vocab_dir, "
        r"eval_dir, max_queries, max_sentences, semeval_pairs, similarities, tasks, "
        r"tatoeba_langs, tatoeba_mean_of_layers, vocab_size, xlsim_pairs\)",
    ):
        spec_of("--spec", str(path))
    assert main(["eval", "--spec", str(path)]) == 2  # before any Ray work
    assert f"distalign: error: {path}:3: unknown key 'suite.bli_pair'" in capsys.readouterr().err  # its line
    with pytest.raises(ConfigError, match=r"unknown key 'suite\.reports'"):  # state, not configuration
        spec_of("--model", "m", "suite.reports=[]")
    with pytest.raises(ConfigError, match=r"unknown key 'tracking\.url' \(allowed here: enabled, experiment, uri\)"):
        spec_of("--model", "m", "tracking.url=x")


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--model", "m", "suite.similarities=[cosine, l2]"], r"suite\.similarities\[1\]: 'l2' is not one of"),
        (["--model", "m", "--tasks", "bli,blii"], r"suite\.tasks\[1\]: 'blii' is not one of"),
        (["--model", "m", "suite.dictionaries=[[de, en]]"], r"suite\.dictionaries\[0\]: expected a list of 3 items"),
        (["--model", "m", "layer=last"], r"layer: expected an integer"),
        (["--model", "m", "cpus_per_task=0"], r"cpus_per_task: must be > 0"),
        (["--model", "m", "suite.tatoeba_mean_of_layers=0"], r"suite\.tatoeba_mean_of_layers: must be >= 1"),
        (["--model", "m", "suite.tatoeba_mean_of_layers=four"], r"suite\.tatoeba_mean_of_layers: expected an integer"),
        ([], r"checkpoint, model: give exactly one"),
    ],
)
def test_bad_values_name_the_key(argv, message):
    with pytest.raises(ConfigError, match=message):
        spec_of(*argv)


def test_checkpoint_and_model_in_one_spec_is_an_error(tmp_path):
    path = write_spec(tmp_path, {"model": "m", "checkpoint": "c"})
    with pytest.raises(ConfigError, match=r"give exactly one"):
        spec_of("--spec", str(path))
    assert spec_of("--spec", str(path), "checkpoint=''").model == "m"


def test_task_flags_come_from_the_task_plugins(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    spec = spec_of(
        "--model",
        "m",
        "--dictionary",
        "de-en:extra.tsv",
        "--dictionary",
        "fr-en:more.tsv",
        "--similarity",
        "csls",
        "--max-sentences",
        "5",
        "--tatoeba-langs",
        "deu",
    )
    assert spec.suite.dictionaries == (
        ("de", "en", str(tmp_path / "extra.tsv")),
        ("fr", "en", str(tmp_path / "more.tsv")),
    )
    assert (
        spec.suite.similarities == ("csls",) and spec.suite.max_sentences == 5 and spec.suite.tatoeba_langs == ("deu",)
    )
    with pytest.raises(InputError, match=r"--dictionary 'de-en': expected L1-L2:PATH"):
        spec_of("--model", "m", "--dictionary", "de-en")
