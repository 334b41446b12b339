"""Objective-owned parameters (not part of the exported model) survive a checkpoint round trip; checkpoint
files are loaded as tensors only (``weights_only``), so a tampered file on shared storage cannot run code."""

import pickle

import pytest
import torch
from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

from conftest import QUICKSTART
from distalign.checkpoint import OBJECTIVES_FILE, OPTIMIZER_FILE, read_objective_state
from distalign.config import load_config
from distalign.objectives.dict_mlm import DictMLMObjective
from distalign.objectives.sense_state import SenseState
from distalign.train.engine import DDPEngine
from distalign.train.module import TrainingModule


def model_with_dict_mlm(seed):
    torch.manual_seed(seed)
    lm = XLMRobertaForMaskedLM(XLMRobertaConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1,
                                                num_attention_heads=2, intermediate_size=32,
                                                max_position_embeddings=20))
    return TrainingModule(lm, {"dict_mlm": DictMLMObjective.for_model(lm, 3)}, {"dict_mlm": 1.0})


def test_objective_state_round_trip(tmp_path):
    trained = model_with_dict_mlm(0)
    with torch.no_grad():
        trained.objectives["dict_mlm"].language_embeddings.embedding.weight.normal_()
    torch.save(trained.objectives.state_dict(), tmp_path / OBJECTIVES_FILE)
    fresh = model_with_dict_mlm(1)
    assert not torch.equal(fresh.objectives.state_dict()["dict_mlm.head.dense.weight"],
                           trained.objectives.state_dict()["dict_mlm.head.dense.weight"])
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
    engine = DDPEngine(model_with_dict_mlm(0), load_config(QUICKSTART).train, find_unused_parameters=True,
                       device=torch.device("cpu"))
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
