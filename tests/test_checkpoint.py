"""Objective-owned parameters (not part of the exported model) survive a checkpoint round trip; checkpoint
files are loaded as tensors only (``weights_only``), so a tampered file on shared storage cannot run code."""

import pickle
import shutil

import pytest
import torch
from conftest import QUICKSTART
from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

from distalign.checkpoint import OBJECTIVES_FILE, OPTIMIZER_FILE, read_objective_state
from distalign.config import load_config
from distalign.objectives.dict_mlm import DictMLMObjective
from distalign.objectives.sense_state import SenseState
from distalign.train.engine import DDPEngine
from distalign.train.module import TrainingModule


def model_with_dict_mlm(seed):
    torch.manual_seed(seed)
    lm = XLMRobertaForMaskedLM(
        XLMRobertaConfig(
            vocab_size=30,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=20,
        )
    )
    return TrainingModule(lm, {"dict_mlm": DictMLMObjective.for_model(lm, 3)}, {"dict_mlm": 1.0})


def test_objective_state_round_trip(tmp_path):
    trained = model_with_dict_mlm(0)
    with torch.no_grad():
        trained.objectives["dict_mlm"].language_embeddings.embedding.weight.normal_()
    torch.save(trained.objectives.state_dict(), tmp_path / OBJECTIVES_FILE)
    fresh = model_with_dict_mlm(1)
    assert not torch.equal(
        fresh.objectives.state_dict()["dict_mlm.head.dense.weight"],
        trained.objectives.state_dict()["dict_mlm.head.dense.weight"],
    )
    fresh.objectives.load_state_dict(read_objective_state(tmp_path))
    for key, value in trained.objectives.state_dict().items():
        assert torch.equal(fresh.objectives.state_dict()[key], value), key
    assert read_objective_state(tmp_path / "no-such-checkpoint") is None  # nothing saved


class RunsCode:
    """A pickle that would run a command when loaded without ``weights_only``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def test_checkpoint_files_that_would_run_code_are_refused(tmp_path, gloo_group):
    marker = tmp_path / "pwned"
    torch.save({"dict_mlm.head.dense.weight": RunsCode(marker)}, tmp_path / OBJECTIVES_FILE)
    torch.save({"optimizer": RunsCode(marker), "schedule": {}}, tmp_path / OPTIMIZER_FILE)
    with pytest.raises(pickle.UnpicklingError):
        read_objective_state(tmp_path)
    engine = DDPEngine(
        model_with_dict_mlm(0),
        load_config(QUICKSTART).train,
        10,
        find_unused_parameters=True,
        device=torch.device("cpu"),
    )
    with pytest.raises(pickle.UnpicklingError):
        engine.load(tmp_path)
    assert not marker.exists()
    # what the engine itself saves loads back under the same restriction
    engine.save(tmp_path, rank=0)
    engine.load(tmp_path)


def test_sense_state_loads_as_plain_tensors(tmp_path):
    state = SenseState(vocab_size=20, num_senses=2, hidden_size=8, proj_dim=2, queue_size=8)
    torch.save({"sense_aware._extra_state": state.state_dict()}, tmp_path / OBJECTIVES_FILE)
    loaded = read_objective_state(tmp_path)["sense_aware._extra_state"]
    assert loaded.keys() == state.state_dict().keys()


def test_a_checkpoint_is_complete_only_with_every_ranks_files_at_their_sizes_and_checksums(tmp_path):
    """Two ranks write into their own directories, merged into one as Ray Train does; then a file is corrupted
    in place, and files go missing or short, as when an upload is cut off. Rank 0 checksums the files it reads
    (the shared ones and its own), not rank 1's shard."""
    import ray.train

    from distalign.checkpoint import write_manifest
    from distalign.train.resume import staged_checkpoint

    def incomplete_files(directory):
        return staged_checkpoint(ray.train.Checkpoint(str(directory)), rank=0)[1]

    merged = tmp_path / "merged"
    for rank, files in (
        (0, {"trainer_state.json": "{}", "model/model.safetensors": "x" * 100}),
        (1, {"deepspeed/state/zero_pp_rank_1_mp_rank_00_optim_states.pt": "y" * 50}),
    ):
        own = tmp_path / f"rank{rank}"
        for name, text in files.items():
            (own / name).parent.mkdir(parents=True, exist_ok=True)
            (own / name).write_text(text)
        write_manifest(own, rank, world_size=2)
        shutil.copytree(own, merged, dirs_exist_ok=True)
    assert incomplete_files(merged) == []

    (merged / "model" / "model.safetensors").write_text("x" * 99 + "z")  # same size, one byte flipped
    assert incomplete_files(merged) == ["model/model.safetensors (checksum differs: corrupted)"]
    (merged / "model" / "model.safetensors").write_text("x" * 100)
    (merged / "deepspeed" / "state" / "zero_pp_rank_1_mp_rank_00_optim_states.pt").write_text(
        "z" * 50
    )  # rank 1's: rank 1 reads it
    assert incomplete_files(merged) == []
    shutil.copy(
        tmp_path / "rank1" / "deepspeed" / "state" / "zero_pp_rank_1_mp_rank_00_optim_states.pt",
        merged / "deepspeed" / "state",
    )
    (merged / "files.1.json").unlink()  # rank 1's upload never finished
    assert incomplete_files(merged) == ["files.1.json"]
    shutil.copy(tmp_path / "rank1" / "files.1.json", merged)
    (merged / "model" / "model.safetensors").write_text("x" * 40)  # cut short
    (merged / "deepspeed" / "state" / "zero_pp_rank_1_mp_rank_00_optim_states.pt").unlink()
    assert incomplete_files(merged) == [
        "model/model.safetensors (40 of 100 bytes)",
        "deepspeed/state/zero_pp_rank_1_mp_rank_00_optim_states.pt",
    ]
    (merged / "files.0.json").unlink()
    assert incomplete_files(merged) == ["files.0.json"]


def test_deepspeed_shards_that_would_run_code_are_refused(tmp_path, gloo_group, monkeypatch):
    """DeepSpeed's own loader reads its shards with weights_only=False; the engine swaps in one that does not."""
    from distalign.train.engine import DeepSpeedEngine

    for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(key, value)
    config = load_config(QUICKSTART, ["train.engine=deepspeed", "train.zero_stage=2"]).train
    engine = DeepSpeedEngine(model_with_dict_mlm(0), config, config.max_steps)
    engine.save(tmp_path, rank=0)
    engine.load(tmp_path)  # what DeepSpeed saves loads back under the restriction (its loss scaler, ZeRO enums)
    (shard,) = (tmp_path / "deepspeed" / "state").glob("zero_pp_rank_0_*optim_states.pt")
    marker = tmp_path / "pwned"
    state = torch.load(shard, weights_only=False)
    state["optimizer_state_dict"]["loss_scaler"] = RunsCode(marker)
    torch.save(state, shard)
    with pytest.raises(pickle.UnpicklingError):
        engine.load(tmp_path)
    assert not marker.exists()


def test_a_resume_may_change_the_objective_mix():
    """State of an objective dropped from the run is left out, and one added keeps its initial state, both said;
    the state of the objectives in both runs is restored."""
    from distalign.checkpoint import restore_objective_state
    from distalign.objectives.align_mlm import AlignObjective

    def align(steps):
        objective = AlignObjective(torch.tensor([[2]]), torch.tensor([[3]]))
        objective.steps.fill_(steps)
        return objective

    saved = torch.nn.ModuleDict({"align": align(7), "gone": align(9)}).state_dict()
    resumed = torch.nn.ModuleDict({"align": align(0), "new": align(0)})
    notes = restore_objective_state(resumed, saved)
    assert int(resumed["align"].steps) == 7 and int(resumed["new"].steps) == 0
    assert notes == [
        "objective 'gone' is not in this run: its checkpointed state is left out",
        "objective 'new' is new to this run: it starts from its initial state",
    ]


def test_deepspeed_checkpoints_hold_the_weights_once(tmp_path, gloo_group, monkeypatch):
    """DeepSpeed's model states are saved without the module's weights (the exported model holds them); a module
    built from other weights gets the trained ones back from ZeRO's fp32 master shards."""
    from deepspeed.utils import safe_get_full_fp32_param

    from distalign.train.engine import DeepSpeedEngine

    for key, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(key, value)
    config = load_config(QUICKSTART, ["train.engine=deepspeed", "train.zero_stage=2"]).train
    engine = DeepSpeedEngine(model_with_dict_mlm(0), config, config.max_steps)
    engine.save(tmp_path, rank=0)
    (states,) = (tmp_path / "deepspeed" / "state").glob("mp_rank_00_model_states.pt")
    saved = torch.load(states, weights_only=False)
    assert saved["module"] == {} and not saved.get("frozen_param_fragments")
    trained = {name: safe_get_full_fp32_param(p).clone() for name, p in engine.module.named_parameters()}

    other = DeepSpeedEngine(model_with_dict_mlm(1), config, config.max_steps)  # other initial weights
    other.load(tmp_path)
    for name, parameter in other.module.named_parameters():
        assert torch.equal(parameter.detach(), trained[name]), name
