"""``distalign eval --checkpoint`` against the run that saved the checkpoint: a ``--dictionary`` equal to the run's
evaluation dictionary gives the in-loop BLI number (same sample of source words, same cased targets, same layer and
word budget), and every evaluation is an MLflow run of its own that leaves the training run as training left it."""

import json
import random

import pandas as pd
import pytest
from conftest import QUICKSTART, SMALL

from distalign.cli import main
from distalign.config import load_config
from distalign.eval.checkpoint_eval import EVALUATED_RUN_TAG, EVALUATED_STEP_TAG
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import local_streams
from distalign.tracking import CHECKPOINT_TAG, PARENT_TAG, client_for, tracked_run
from distalign.train.recipe import TrainingRecipe
from distalign.train.trainer import plan_training

# a cased dictionary: German nouns keep their capitals, and a cased model sees "Haus", not "haus"
TEST_EN = [
    "house",
    "tree",
    "river",
    "stone",
    "bird",
    "sun",
    "moon",
    "water",
    "dog",
    "cat",
    "city",
    "road",
    "book",
    "table",
    "chair",
    "door",
    "window",
    "garden",
    "field",
    "forest",
]
TEST_DE = [
    "Haus",
    "Baum",
    "Fluss",
    "Stein",
    "Vogel",
    "Sonne",
    "Mond",
    "Wasser",
    "Hund",
    "Katze",
    "Stadt",
    "Straße",
    "Buch",
    "Tisch",
    "Stuhl",
    "Tür",
    "Fenster",
    "Garten",
    "Feld",
    "Wald",
]
TRAIN_EN = [f"word{i}" for i in range(40)]
TRAIN_DE = [f"Wort{i}" for i in range(40)]


def write_inputs(root):
    """Corpora in en and de, a training dictionary, the run's cased evaluation dictionary (two translations for
    some words) and an eval dir whose German frequency list knows none of the test words."""
    rng = random.Random(0)
    root.mkdir()
    for lang, words in (("en", TEST_EN + TRAIN_EN), ("de", TEST_DE + TRAIN_DE)):
        (root / f"{lang}.txt").write_text("".join(" ".join(rng.choices(words, k=7)) + "\n" for _ in range(300)))
    (root / "train.en-de.tsv").write_text("".join(f"{e}\t{d}\n" for e, d in zip(TRAIN_EN, TRAIN_DE)))
    pairs = list(zip(TEST_EN, TEST_DE)) + [("house", "Gebäude"), ("road", "Weg")]
    (root / "test.en-de.tsv").write_text("".join(f"{e}\t{d}\n" for e, d in pairs))
    (root / "eval" / "vocab").mkdir(parents=True)
    (root / "eval" / "vocab" / "de_vocab.txt").write_text("der\ndie\ndas\nund\nhaus\n")
    return root


def snapshot(client, run_id: str) -> str:
    """Everything a run recorded: params, tags, every metric's whole history, every artifact with its size."""
    run = client.get_run(run_id)

    def artifacts(path=None):
        found = []
        for item in client.list_artifacts(run_id, path):
            found += artifacts(item.path) if item.is_dir else [(item.path, item.file_size)]
        return found

    history = {
        key: [(m.step, m.value, m.timestamp) for m in client.get_metric_history(run_id, key)]
        for key in sorted(run.data.metrics)
    }
    return json.dumps(
        {
            "params": run.data.params,
            "tags": run.data.tags,
            "metrics": history,
            "artifacts": sorted(artifacts()),
            "status": run.info.status,
        },
        sort_keys=True,
    )


def test_a_checkpoint_s_standalone_bli_is_its_in_loop_bli_and_leaves_its_run_alone(
    ray_local, gloo_group, tmp_path, monkeypatch
):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    data = write_inputs(tmp_path / "data")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    # settings unlike the defaults, so a standalone eval that does not read them from the checkpoint differs:
    # a seeded sample of 12 of the 20 source words, layer 1 of 0..2, 6 subwords a word
    config = load_config(
        QUICKSTART,
        SMALL
        + [
            "run.name=eval-repro",
            "data.source=files",
            "train.num_workers=1",
            "train.seed=3",
            f"data.corpora=[{{path: {data / 'en.txt'}, lang: en}}, {{path: {data / 'de.txt'}, lang: de}}]",
            f"data.dictionaries=[{{path: {data / 'train.en-de.tsv'}, lang1: en, lang2: de}}]",
            f"data.eval_dictionaries=[{{path: {data / 'test.en-de.tsv'}, lang1: en, lang2: de}}]",
            "model.word_layer=1",
            "model.max_word_tokens=6",
            "eval.bli_max_pairs=12",
            f"tracking.uri={uri}",
        ],
    )
    prepared = prepare_data(config)
    checkpoint = tmp_path / "runs" / "eval-repro" / "checkpoint_000002"
    checkpoint.mkdir(parents=True)
    with tracked_run(
        uri, "distalign", config.run.name, str(tmp_path / "runs"), {"train.seed": 3}, config.to_dict()
    ) as run_id:
        recipe = TrainingRecipe(plan_training(config, prepared, run_id))
        recipe.setup()
        streams = local_streams(prepared, config)
        for _ in range(2):
            recipe.step([{name: next(stream) for name, stream in streams.items()}])
        in_loop = recipe.evaluate()["eval/bli/en-de/mrr"]  # what the training loop computes and logs at step 2
        recipe.save(checkpoint)
        recipe._close_tracking()
    client = client_for(uri)
    recorded = snapshot(client, run_id)
    assert client.get_metric_history(run_id, "eval/bli/en-de/mrr")[0].value == in_loop

    evaluations = []
    for i in range(2):  # the same checkpoint evaluated twice
        out = tmp_path / f"out{i}"
        code = main(
            [
                "eval",
                "--checkpoint",
                str(checkpoint),
                "--eval-dir",
                str(data / "eval"),
                "--tasks",
                "bli",
                "--bli-pairs",
                "",
                "--dictionary",
                f"en-de:{data / 'test.en-de.tsv'}",
                "--output-dir",
                str(out),
                "--cache-dir",
                str(tmp_path / "cache"),
                "--tracking-uri",
                uri,
                "--cpus-per-task",
                "0.5",
            ]
        )
        assert code == 0
        rows = pd.read_csv(out / "results.csv")
        mrr = rows[(rows["task"] == "bli") & (rows["pair"] == "en-de") & (rows["metric"] == "mrr")]
        assert mrr["layer"].tolist() == [1]  # the run's word layer only
        assert mrr["value"].iloc[0] == pytest.approx(in_loop, abs=1e-6)
        assert snapshot(client, run_id) == recorded  # the training run: byte for byte what training recorded
        children = client.search_runs(
            [client.get_run(run_id).info.experiment_id],
            f"tags.`{PARENT_TAG}` = '{run_id}'",
            order_by=["attributes.start_time ASC"],
        )
        assert len(children) == i + 1
        evaluation = children[-1]
        assert evaluation.data.tags[EVALUATED_RUN_TAG] == run_id and evaluation.data.tags[EVALUATED_STEP_TAG] == "2"
        assert evaluation.data.tags[CHECKPOINT_TAG] == str(checkpoint)
        history = client.get_metric_history(evaluation.info.run_id, "eval/bli/en-de/mrr")
        assert [(m.step, m.value) for m in history] == [(2, pytest.approx(in_loop, abs=1e-6))]
        evaluations.append(snapshot(client, evaluation.info.run_id))
    assert "eval/results.csv" in dict(map(tuple, json.loads(evaluations[0])["artifacts"]))
    assert snapshot(client, children[0].info.run_id) == evaluations[0]  # the second left the first one's run alone
    assert (
        client.get_run(children[0].info.run_id).info.artifact_uri
        != client.get_run(children[1].info.run_id).info.artifact_uri
    )
