"""Every objective's tiny config as shipped, under DeepSpeed on 2 workers, each in one run (two where it resumes):
it trains, logs its loss to MLflow and checkpoints (ZeRO shards of both ranks); where the run has state beyond
the model and optimizer (adapters, objective-owned parameters, the sense state), a second start resumes from that
checkpoint, and what the objective exports is checked on the resumed run's checkpoint. ALIGN-MLM's runs under
ZeRO-3 (its embedding rows are looked up through the forward, which gathers them): the whole model exported and
resumed. Static alignment trains towards vectors made with the user's commands (extract, align).
(The DDP resume: test_training_integration.py; LAMB's optimizer state, which DDP writes: test_recovery.py.)"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
from conftest import REPO, SENSE_AWARE_SMALL, SMALL
from mlflow.tracking import MlflowClient
from safetensors.torch import load_file

from distalign.checkpoint import MODEL_DIR, OBJECTIVES_FILE, STATE_FILE
from distalign.config import load_config
from distalign.models.adapters import ADAPTER_CONFIG, ADAPTER_WEIGHTS, load_masked_lm_with_adapters
from distalign.models.language_embeddings import read_input_languages
from distalign.models.loading import load_masked_lm
from distalign.tracking import START_MODEL_TAG
from distalign.train.trainer import run_training

pytestmark = pytest.mark.slow
CONFIGS = REPO / "jobs" / "configs"
ZERO2 = ["train.engine=deepspeed", "train.zero_stage=2"]
# a run's first start: its one checkpoint at step 4, where the second start resumes (to SMALL's max_steps 6)
FIRST_FOUR_STEPS = ["train.max_steps=4", "train.checkpoint_every=4"]


def start_model(client: MlflowClient, run_id: str) -> torch.nn.Module:
    """The run's initial tiny model (the path tagged at its start)."""
    return load_masked_lm(client.get_run(run_id).data.tags[START_MODEL_TAG])


def assert_both_ranks_sharded(checkpoint: str) -> None:
    shards = [p.name for p in (Path(checkpoint) / "deepspeed" / "state").iterdir()]
    assert any("zero_pp_rank_0" in s for s in shards) and any("zero_pp_rank_1" in s for s in shards)


def sense_state(checkpoint: str) -> dict:
    return torch.load(Path(checkpoint) / OBJECTIVES_FILE, weights_only=True)["sense_aware._extra_state"]


def only_the_adapters_trained(client: MlflowClient, run_id: str, checkpoint: str) -> None:
    exported = Path(checkpoint) / MODEL_DIR
    assert (exported / ADAPTER_CONFIG).is_file() and (exported / ADAPTER_WEIGHTS).is_file()
    assert json.loads((exported / ADAPTER_CONFIG).read_text())["placement"] == "pfeiffer"  # BabelBERT's, by default
    # the base weights are the untouched initial tiny model; all learning sits in the adapters
    initial = start_model(client, run_id).state_dict()
    trained = load_masked_lm(str(exported)).state_dict()
    assert all(torch.equal(initial[k], trained[k]) for k in initial)
    adapters = load_file(str(exported / ADAPTER_WEIGHTS))
    up = [v for k, v in adapters.items() if k.endswith(".up.weight")]
    assert up and all(v.abs().sum() > 0 for v in up)  # zero-initialised, moved by training
    assert len(list(load_masked_lm_with_adapters(str(exported)).base_model.encoder.layer)) == 2


def language_table_exported(client: MlflowClient, run_id: str, checkpoint: str) -> None:
    state = torch.load(Path(checkpoint) / OBJECTIVES_FILE, weights_only=True)
    # zero-initialised language embeddings were trained and saved beside the model, not in it
    assert state["dict_mlm.language_embeddings.embedding.weight"].abs().sum() > 0
    assert "dict_mlm" not in str(load_masked_lm(str(Path(checkpoint) / MODEL_DIR)).state_dict().keys())
    table = read_input_languages(Path(checkpoint) / MODEL_DIR)  # the input table, exported (DICT-MLM §3.1)
    assert table.languages == ("xa", "xb", "xc")
    assert torch.equal(table.embedding.weight, state["dict_mlm.language_embeddings.embedding.weight"])


def original_architecture_exported(client: MlflowClient, run_id: str, checkpoint: str) -> None:
    # the exported model keeps the original architecture (sense vectors are not exported)
    initial = start_model(client, run_id).config.vocab_size
    assert load_masked_lm(str(Path(checkpoint) / MODEL_DIR)).config.vocab_size == initial


@dataclass
class TinyCase:
    objective: str  # its loss is logged as Train/<objective>_loss
    exported: Callable[[MlflowClient, str, str], None]  # checks the resumed run's checkpoint
    shrink: list[str] = field(default_factory=list)  # what brings it down to a few steps


# (align: under ZeRO-3 below; static: its run trains towards the user's vectors, below)
RESUMED_CONFIGS = {
    "babelbert_sense_adapters_tiny.yaml": TinyCase("lexical", only_the_adapters_trained),
    "dict_mlm_tiny.yaml": TinyCase(
        "dict_mlm", language_table_exported, ["objectives.dict_mlm.tlm=true", "data.pack_sequences=false"]
    ),
    "sense_aware_tiny.yaml": TinyCase("sense_aware", original_architecture_exported, SENSE_AWARE_SMALL),
}


@pytest.mark.parametrize("name", sorted(RESUMED_CONFIGS))
def test_tiny_config_under_zero2_checkpoints_resumes_and_exports(name, ray_local, distalign_home):
    case = RESUMED_CONFIGS[name]
    path = CONFIGS / name
    overrides = SMALL + case.shrink + ZERO2 + [f"run.name={path.stem}-zero2"]
    first = run_training(load_config(path, overrides + FIRST_FOUR_STEPS))
    assert_both_ranks_sharded(first.checkpoint)
    # read now: the resumed run may delete this checkpoint (Ray keeps the best by selection score + the latest)
    first_sense = sense_state(first.checkpoint) if case.objective == "sense_aware" else None

    config = load_config(path, overrides)  # max_steps 6: the same run name resumes at step 4
    last = run_training(config)
    client = MlflowClient(config.tracking.uri)
    assert last.run_id == first.run_id and client.get_run(last.run_id).info.status == "FINISHED"
    assert sorted(m.step for m in client.get_metric_history(last.run_id, f"Train/{case.objective}_loss")) == [2, 4, 6]
    assert json.loads((Path(last.checkpoint) / STATE_FILE).read_text())["step"] == 6
    case.exported(client, last.run_id, last.checkpoint)
    if first_sense is not None:
        # the sense state (centres, projection, step) is training state: restored on resume, so it counts on
        last_sense = sense_state(last.checkpoint)
        assert (int(first_sense["step"]), int(last_sense["step"])) == (4, 6)
        assert int(last_sense["fitted"]) == 1 and last_sense["proj"].abs().sum() > 0  # fitted after warm-up


def test_align_mlm_under_zero3_exports_the_whole_model_gathered_to_rank_0_and_resumes(ray_local, distalign_home):
    """ZeRO-3 partitions every parameter; the checkpoint's model directory is the whole trained model (DeepSpeed's
    16-bit gather to rank 0), loadable as a plain Hugging Face model, and the run resumes from its shards. The
    shipped ALIGN-MLM config, with the quickstart's lexical term added (every objective the quickstart trains)."""
    path = CONFIGS / "align_mlm_tiny.yaml"
    overrides = SMALL + [
        "objectives.lexical.weight=1",
        "train.engine=deepspeed",
        "train.zero_stage=3",
        "run.name=align-mlm-zero3",
    ]
    first = run_training(load_config(path, overrides + FIRST_FOUR_STEPS))
    assert_both_ranks_sharded(first.checkpoint)
    config = load_config(path, overrides)
    client = MlflowClient(config.tracking.uri)
    exported = load_masked_lm(str(Path(first.checkpoint) / MODEL_DIR))
    trained, initial = exported.state_dict(), start_model(client, first.run_id).state_dict()
    assert trained.keys() == initial.keys()
    assert all(trained[k].shape == initial[k].shape and torch.isfinite(trained[k]).all() for k in trained)
    moved = [k for k in trained if not torch.equal(trained[k], initial[k])]
    assert any("encoder.layer.0.attention" in k for k in moved)  # trained weights, not placeholders
    again = run_training(config)  # max_steps 6: resumes at step 4
    assert again.run_id == first.run_id and client.get_run(again.run_id).info.status == "FINISHED"
    assert json.loads((Path(again.checkpoint) / STATE_FILE).read_text())["step"] == 6
    for objective in ("align", "lexical", "mlm"):
        assert sorted(m.step for m in client.get_metric_history(again.run_id, f"Train/{objective}_loss")) == [2, 4, 6]


def test_static_vectors_extracted_aligned_and_trained_towards_under_zero2(ray_local, distalign_home, tmp_path, capsys):
    """The shipped static config derives its targets from the starting model when it names no vectors; the user's
    commands (static_align.yaml's header) make them instead, and a ZeRO-2 run trains towards those (with the
    config's MSE; Deep CCA: tests/objectives/test_static_align.py)."""
    from gensim.models import KeyedVectors

    from distalign.cli import main as distalign
    from distalign.preparation.inputs import prepare_data

    path = CONFIGS / "static_align_tiny.yaml"
    overrides = SMALL + ZERO2 + ["train.batch_sizes.static=16", "run.name=static-align-tiny-zero2"]
    prepared = prepare_data(load_config(path, overrides))  # the world and the tiny model of this run
    derived = prepared.tables["static"]  # no data.static_vectors: derived from the starting model, every language
    assert set(derived["lang"].to_pylist()) == {"xa", "xb", "xc"}
    corpora = {source.lang: source.paths for source in prepared.corpus.sources}
    for lang in ("xa", "xb"):  # the user's commands, as static_align.yaml's header gives them
        assert (
            distalign(
                [
                    "static",
                    "extract",
                    "--model",
                    prepared.model_path,
                    "--corpus",
                    *corpora[lang],
                    "--out",
                    str(tmp_path / f"{lang}.vec"),
                    "--layer",
                    "1",
                    "--epochs",
                    "2",
                    "--min-count",
                    "2",
                ]
            )
            == 0
        )
    assert f"static vectors from 300 sentences -> {tmp_path / 'xb.vec'}" in capsys.readouterr().out
    pairs = prepared.constraints.filter(
        (prepared.constraints["lang1"].to_numpy(zero_copy_only=False) == "xa")
        & (prepared.constraints["lang2"].to_numpy(zero_copy_only=False) == "xb")
    )
    seed = tmp_path / "seed.xb-xa.tsv"
    seed.write_text("".join(f"{b}\t{a}\n" for a, b in zip(pairs["word1"].to_pylist(), pairs["word2"].to_pylist())))
    assert (
        distalign(
            [
                "static",
                "align",
                "--src",
                str(tmp_path / "xb.vec"),
                "--tgt",
                str(tmp_path / "xa.vec"),
                "--dictionary",
                str(seed),
                "--out",
                str(tmp_path / "xb.aligned.vec"),
                "--iterations",
                "1",
                "--tgt-out",
                str(tmp_path / "xa.normalised.vec"),
            ]
        )
        == 0
    )
    seed_pairs, missing = map(int, re.search(r"seed pairs (\d+) \((\d+) with", capsys.readouterr().out).groups())
    assert seed_pairs > missing
    for name in ("xa.vec", "xb.vec", "xb.aligned.vec", "xa.normalised.vec"):  # gensim reads every file written
        assert KeyedVectors.load_word2vec_format(str(tmp_path / name), binary=False).vector_size == 64

    config = load_config(
        path,
        overrides
        + [
            f'data.static_vectors=[{{path: "{tmp_path / "xa.normalised.vec"}", lang: xa}}, '
            f'{{path: "{tmp_path / "xb.aligned.vec"}", lang: xb}}]'
        ],
    )
    assert config.objectives.static.loss == "mse"
    outcome = run_training(config)
    assert_both_ranks_sharded(outcome.checkpoint)
    client = MlflowClient(config.tracking.uri)
    assert client.get_run(outcome.run_id).info.status == "FINISHED"
    assert json.loads((Path(outcome.checkpoint) / STATE_FILE).read_text())["step"] == 6
    losses = sorted(client.get_metric_history(outcome.run_id, "Train/static_loss"), key=lambda m: m.step)
    assert [m.step for m in losses] == [2, 4, 6]
    assert losses[-1].value < losses[0].value  # the contextual vectors move towards the static ones
