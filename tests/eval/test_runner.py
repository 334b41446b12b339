"""``distalign eval`` end to end: files -> Ray encoding/scoring tasks -> tables, plots, MLflow."""

import random

import pandas as pd
import pytest
import yaml
from conftest import QUICKSTART, SHARED_DATA, staged_by_ray_tasks

from distalign.checkpoint import MODEL_DIR, TrainerState, write_state
from distalign.cli import main
from distalign.config import TinyModelConfig, load_config
from distalign.errors import ConfigError, InputError
from distalign.eval.local_evaluation import evaluate_locally
from distalign.eval.suite import build_tasks
from distalign.eval.suite_spec import SuiteSpec
from distalign.models.encoder import Encoder
from distalign.models.loading import build_tiny_model, load_masked_lm, load_tokenizer
from distalign.tracking import PARENT_TAG, client_for, experiment_id

EN = ["dog", "cat", "house", "tree", "river", "stone", "bird", "sun", "moon", "water"]
DE = ["hund", "katze", "haus", "baum", "fluss", "stein", "vogel", "sonne", "mond", "wasser"]
FR = ["chien", "chat", "maison", "arbre", "fleuve", "pierre", "oiseau", "soleil", "lune", "eau"]
TINY = TinyModelConfig(vocab_size=300, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
STEP = 40


def write_eval_dir(root):
    """A miniature ../shared/data/eval: G-BLI en-de only (de-en is read swapped), vocabularies, ENG-FRA, fra."""
    gbli = root / "bli" / "gbli" / "en-de"
    gbli.mkdir(parents=True)
    (gbli / "yacle.test.freq.2k.en-de.tsv").write_text("".join(f"{e}\t{d.capitalize()}\n" for e, d in zip(EN, DE)))
    (root / "vocab").mkdir()
    (root / "vocab" / "en_vocab.txt").write_text("\n".join(EN + ["the", "a", "of"]) + "\n")
    (root / "multisimlex").mkdir()
    (root / "multisimlex" / "ENG-FRA.csv").write_text(
        "ID,ENG,FRA,PoS,score\n" + "".join(f"{i},{e},{f},N,{i % 5}.5\n" for i, (e, f) in enumerate(zip(EN, FR)))
    )
    (root / "tatoeba").mkdir()
    rng = random.Random(0)
    sentences = [rng.sample(range(10), 4) for _ in range(12)]
    (root / "tatoeba" / "tatoeba.fra-eng.fra").write_text("".join(" ".join(FR[i] for i in s) + "\n" for s in sentences))
    (root / "tatoeba" / "tatoeba.fra-eng.eng").write_text("".join(" ".join(EN[i] for i in s) + "\n" for s in sentences))
    return root


def test_bli_reaches_csls_and_per_pair_ranking_with_the_source_vocabulary(tmp_path):
    """What the runner hands BLI: the source language's vocabulary file is the CSLS source space, and
    per-pair ranking drops (and counts) test pairs whose source word is outside it."""
    eval_dir = write_eval_dir(tmp_path / "eval")
    source_words = DE[:8] + ["und", "der"]  # two test words left out of the source vocabulary
    (eval_dir / "vocab" / "de_vocab.txt").write_text("\n".join(source_words) + "\n")
    (grouped,) = build_tasks(
        SuiteSpec(eval_dir=str(eval_dir), tasks=("bli",), bli_pairs=("de-en",), similarities=("csls",))
    )
    written = [w.capitalize() for w in DE]  # G-BLI's German nouns: encoded as written, looked up lower-cased
    assert grouped.source_vocab == source_words and grouped.queries == written
    assert grouped.text_sets()["src"].texts == source_words + written  # the space, plus the queries as written
    (per_pair,) = build_tasks(
        SuiteSpec(eval_dir=str(eval_dir), tasks=("bli",), bli_pairs=("de-en",), bli_ranking="per_pair")
    )
    assert per_pair.queries == written[:8] and per_pair.oov_source == 2
    assert per_pair.text_sets()["src"].texts == source_words + written[:8]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A checkpoint directory (model/ + trainer_state.json) whose training run exists in a sqlite MLflow store."""
    root = tmp_path_factory.mktemp("ckpt")
    rng = random.Random(1)
    texts = [" ".join(rng.choices(words, k=6)) for words in (EN, DE, FR) for _ in range(100)]
    build_tiny_model(root / "checkpoint_000" / MODEL_DIR, texts, TINY)
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = client_for(uri)
    run_id = client.create_run(experiment_id(client, "train")).info.run_id
    write_state(root / "checkpoint_000", TrainerState(step=STEP, mlflow_run_id=run_id))
    return root / "checkpoint_000", uri, run_id


def test_suite_reads_every_file_before_ray_and_names_bad_input(tmp_path):
    eval_dir = write_eval_dir(tmp_path / "eval")
    tasks = build_tasks(
        SuiteSpec(
            eval_dir=str(eval_dir),
            tasks=("bli", "xlsim", "tatoeba", "word_alignment"),
            bli_pairs=("de-en",),
            xlsim_pairs=("eng-fra",),
            tatoeba_langs=("fra",),
            similarities=("cosine", "csls"),
        )
    )
    assert [(t.task, t.pair) for t in tasks] == [
        ("bli", "de-en"),
        ("bli_csls", "de-en"),
        ("word_alignment", "de-en"),
        ("xlsim", "eng-fra"),
        ("tatoeba", "fra-eng"),
    ]
    bli = tasks[0]
    # the reversed file: queries as written, the vocabulary lower-cased
    assert bli.queries == [w.capitalize() for w in DE] and bli.vocab == [w for w in EN + ["the", "a", "of"]]
    assert bli.gold == [[i] for i in range(10)]
    (eval_dir / "bli" / "gbli" / "en-fi").mkdir()  # fi is a G-BLI language, de-fi no pair of it
    with pytest.raises(InputError, match="no G-BLI test dictionary for de-fi"):
        build_tasks(SuiteSpec(eval_dir=str(eval_dir), tasks=("bli",), bli_pairs=("de-fi",)))
    with pytest.raises(ConfigError, match=r"suite\.bli_pairs \(--bli-pairs\): no data for 'ja' .* holds: de, en, fi$"):
        build_tasks(SuiteSpec(eval_dir=str(eval_dir), tasks=("bli",), bli_pairs=("de-ja",)))
    with pytest.raises(InputError, match="unknown task.*'blii'"):
        build_tasks(SuiteSpec(eval_dir=str(eval_dir), tasks=("blii",)))
    with pytest.raises(InputError, match="not a language pair"):
        build_tasks(SuiteSpec(eval_dir=str(eval_dir), tasks=("xlsim",), xlsim_pairs=("eng",)))


def test_benchmark_languages_in_any_form_find_the_codes_of_their_files(tmp_path):
    """Tatoeba and Multi-SimLex name their files in ISO 639-3 (ENG-FRA.csv, tatoeba.fra-eng.fra): fr, French, FRA
    are all fra, once; G-BLI in ISO 639-1 (en-de/): deu-eng is de-en."""
    eval_dir = write_eval_dir(tmp_path / "eval")
    tasks = build_tasks(
        SuiteSpec(
            eval_dir=str(eval_dir),
            tasks=("bli", "xlsim", "tatoeba"),
            bli_pairs=("deu-eng", "German-en"),
            xlsim_pairs=("en-fr", "English-French"),
            tatoeba_langs=("fr", "French", "FRA"),
        )
    )
    assert [(t.task, t.pair) for t in tasks] == [("bli", "de-en"), ("xlsim", "eng-fra"), ("tatoeba", "fra-eng")]
    with pytest.raises(
        ConfigError,
        match=r"^suite\.tatoeba_langs \(--tatoeba-langs\): no data for 'German' "
        r"\(language de, ISO 639-3 deu\); Tatoeba \(.*\) holds: fra$",
    ):
        build_tasks(SuiteSpec(eval_dir=str(eval_dir), tasks=("tatoeba",), tatoeba_langs=("fr", "German")))
    with pytest.raises(
        ConfigError,
        match=r"^suite\.xlsim_pairs \(--xlsim-pairs\): 'qq' is not a language code.*"
        r"; Multi-SimLex \(.*\) holds: eng, fra$",
    ):
        build_tasks(SuiteSpec(eval_dir=str(eval_dir), tasks=("xlsim",), xlsim_pairs=("en-qq",)))


def test_eval_cli_logs_a_child_run_of_the_checkpoints_run(ray_local, checkpoint, tmp_path, capsys):
    ckpt, uri, run_id = checkpoint
    eval_dir = write_eval_dir(tmp_path / "eval")
    out = tmp_path / "out"
    code = main(
        [
            "eval",
            "--checkpoint",
            str(ckpt),
            "--eval-dir",
            str(eval_dir),
            "--tasks",
            "bli,xlsim,tatoeba,word_alignment",
            "--bli-pairs",
            "de-en",
            "--xlsim-pairs",
            "eng-fra",
            "--tatoeba-langs",
            "fra",
            "--similarity",
            "cosine,csls",
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
    printed = capsys.readouterr().out
    assert "15/15 " in printed and "best layer per task and pair" in printed  # 5 tasks x 3 layers, with progress

    # Ray results equal an in-process evaluation of the same tasks
    table = pd.read_parquet(out / "results.parquet")
    tasks = build_tasks(
        SuiteSpec(
            eval_dir=str(eval_dir),
            tasks=("bli", "xlsim", "tatoeba", "word_alignment"),
            bli_pairs=("de-en",),
            xlsim_pairs=("eng-fra",),
            tatoeba_langs=("fra",),
            similarities=("cosine", "csls"),
        )
    )
    model_dir = str(ckpt / MODEL_DIR)
    local = pd.DataFrame(evaluate_locally(Encoder(load_masked_lm(model_dir)), load_tokenizer(model_dir), tasks))
    merged = table[table["pair"] != "avg"].merge(local, on=["task", "pair", "layer", "metric"])
    assert len(merged) == len(local) == 3 * (2 * 5 + 1 + 3 + 1)
    assert merged["value_x"].to_numpy() == pytest.approx(merged["value_y"].to_numpy(), abs=1e-5, nan_ok=True)

    client = client_for(uri)
    training = client.get_run(run_id)
    assert training.data.metrics == {} and client.list_artifacts(run_id) == []  # the training run is left alone
    [evaluation] = client.search_runs([training.info.experiment_id], f"tags.`{PARENT_TAG}` = '{run_id}'")
    eval_id, metrics = evaluation.info.run_id, evaluation.data.metrics
    assert {
        "eval/bli/de-en/mrr",
        "eval/bli_csls/avg/mrr",
        "eval/xlsim/eng-fra/spearman",
        "eval/tatoeba/fra-eng/acc",
        "eval/word_alignment/de-en/score",
        "eval/bli/best_layer/mrr",
    } <= set(metrics)
    best = table[(table["task"] == "bli") & (table["pair"] == "de-en") & (table["metric"] == "mrr")]["value"].max()
    assert metrics["eval/bli/de-en/mrr"] == pytest.approx(best)  # logged at the best layer
    assert client.get_metric_history(eval_id, "eval/bli/de-en/mrr")[0].step == STEP  # at the checkpoint's step
    artifacts = {a.path for a in client.list_artifacts(eval_id, "eval")}
    assert {
        f"eval/{name}"
        for name in ("results.parquet", "results.csv", "best_layers.csv", "by_layer.png", "heatmap_bli.png")
    } <= artifacts


@pytest.mark.skipif(not SHARED_DATA.exists(), reason="../shared/data is absent")
def test_eval_cli_on_real_benchmarks_new_run(ray_local, checkpoint, tmp_path):
    ckpt, _, _ = checkpoint
    uri = f"sqlite:///{tmp_path / 'eval.db'}"
    code = main(
        [
            "eval",
            "--model",
            str(ckpt / MODEL_DIR),
            "--eval-dir",
            str(SHARED_DATA / "eval"),
            "--bli-pairs",
            "de-en,en-fi",
            "--xlsim-pairs",
            "eng-fra",
            "--tatoeba-langs",
            "deu,fra",
            "--vocab-size",
            "3000",
            "--max-queries",
            "100",
            "--max-sentences",
            "100",
            "--layer",
            "-1",
            "--output-dir",
            str(tmp_path / "out"),
            "--tracking-uri",
            uri,
            "--cpus-per-task",
            "0.5",
        ]
    )
    assert code == 0
    client = client_for(uri)
    [run] = client.search_runs([client.get_experiment_by_name("distalign-eval").experiment_id])
    assert run.info.status == "FINISHED"
    assert {
        "eval/bli/de-en/mrr",
        "eval/bli/en-fi/p_at_1",
        "eval/xlsim/eng-fra/spearman",
        "eval/tatoeba/deu-eng/acc",
        "eval/tatoeba/avg/acc",
    } <= set(run.data.metrics)
    assert {"eval/results.parquet", "eval/by_layer.png"} <= {
        a.path for a in client.list_artifacts(run.info.run_id, "eval")
    }


def test_eval_and_train_configs_honour_mlflow_tracking_uri(ray_local, checkpoint, tmp_path, monkeypatch):
    """One resolver: with MLFLOW_TRACKING_URI set and no explicit URI, both use that store (not DISTALIGN_HOME's)."""
    ckpt, _, _ = checkpoint
    uri = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path / "home"))
    assert load_config(QUICKSTART).tracking.uri == uri  # what `distalign train` logs to

    write_eval_dir(tmp_path / "eval")
    spec = tmp_path / "spec.yaml"  # eval_dir relative to the spec file
    spec.write_text(
        yaml.safe_dump(
            {"suite": {"eval_dir": "eval", "tasks": ["bli"], "bli_pairs": ["de-en"]}, "layer": -1, "cpus_per_task": 0.5}
        )
    )
    code = main(
        [
            "eval",
            "--spec",
            str(spec),
            "--model",
            str(ckpt / MODEL_DIR),
            f"output_dir={tmp_path / 'out'}",
            f"cache_dir={tmp_path / 'cache'}",
        ]
    )
    assert code == 0
    client = client_for(uri)
    [run] = client.search_runs([client.get_experiment_by_name("distalign-eval").experiment_id])
    assert run.info.status == "FINISHED" and "eval/bli/de-en/mrr" in run.data.metrics
    assert not (tmp_path / "home" / "mlflow.db").exists()


def test_an_s3_model_is_staged_by_the_encoding_tasks_on_their_node(
    s3_endpoint, ray_local, checkpoint, tmp_path, monkeypatch
):
    """``--model s3://...``: the driver stages a copy for its checks, the encoding tasks stage their own on their node
    (the driver's is on the driver's disk only)."""
    from distalign.model_store.model_fetch import fetch_model

    url, _ = s3_endpoint
    ckpt, _, _ = checkpoint
    fetch_model(str(ckpt / MODEL_DIR), "s3://ckpt/models/evaluated", url)
    monkeypatch.setenv("DISTALIGN_STORAGE_ENDPOINT", url)
    monkeypatch.setenv("DISTALIGN_CACHE", str(tmp_path / "driver-cache"))
    code = main(
        [
            "eval",
            "--model",
            "s3://ckpt/models/evaluated",
            "--eval-dir",
            str(write_eval_dir(tmp_path / "eval")),
            "--tasks",
            "bli",
            "--bli-pairs",
            "de-en",
            "--layer",
            "-1",
            "--output-dir",
            str(tmp_path / "out"),
            "--no-mlflow",
            "--cpus-per-task",
            "0.5",
        ]
    )
    assert code == 0
    assert (tmp_path / "out" / "results.csv").is_file()
    assert staged_by_ray_tasks(tmp_path / "driver-cache")


def test_a_tatoeba_mean_over_more_layers_than_the_model_has_fails_before_ray(checkpoint, tmp_path, capsys):
    ckpt, _, _ = checkpoint
    code = main(
        [
            "eval",
            "--checkpoint",
            str(ckpt),
            "--eval-dir",
            str(write_eval_dir(tmp_path / "eval")),
            "--tasks",
            "tatoeba",
            "--tatoeba-langs",
            "fra",
            "--no-mlflow",
            "suite.tatoeba_mean_of_layers=4",
        ]
    )
    assert code == 2
    assert "suite.tatoeba_mean_of_layers: 4 is more than the 3 layers" in capsys.readouterr().err
