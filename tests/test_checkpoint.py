"""Objective-owned parameters (not part of the exported model) survive a checkpoint round trip."""

import torch
from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

from distalign.train.module import TrainingModule
from distalign.objectives.dict_mlm import DictMLMObjective
from distalign.checkpoint import OBJECTIVES_FILE, read_objective_state


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
