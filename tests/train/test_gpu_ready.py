"""Smaller GPU-path defects found by reading (issue 45), each checked on CPU: the settings a CUDA worker applies, the
masks the encoder is given, the mode the model trains in, and metric keys agreed across ranks."""

from __future__ import annotations

import pytest
import torch
import torch.multiprocessing as mp
from conftest import QUICKSTART, SMALL, free_port


def test_tensor_cores_are_turned_on_for_cuda_devices_only():
    from distalign.device import use_tensor_cores

    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        use_tensor_cores(torch.device("cpu"))
        assert not torch.backends.cuda.matmul.allow_tf32
        use_tensor_cores(torch.device("cuda", 0))  # flags only: no CUDA device needed to set them
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def test_the_recipe_trains_with_dropout_and_applies_its_device_s_matmul_settings(tmp_path, monkeypatch, gloo_group):
    """``from_pretrained`` leaves a model in eval mode: the recipe trained without dropout until now."""
    import distalign.train.recipe as recipe_module
    from distalign.config import load_config
    from distalign.preparation.inputs import prepare_data
    from distalign.train.trainer import plan_training

    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    applied = []
    monkeypatch.setattr(recipe_module, "use_tensor_cores", applied.append)
    config = load_config(QUICKSTART, SMALL)
    recipe = recipe_module.TrainingRecipe(plan_training(config, prepare_data(config), mlflow_run_id=""))
    recipe.setup()
    assert applied == [torch.device("cpu")]
    masked_lm = recipe.engine.module.masked_lm
    assert all(module.training for module in masked_lm.modules())
    dropout = [m for m in masked_lm.modules() if isinstance(m, torch.nn.Dropout) and m.p > 0]
    assert dropout, "the tiny model has dropout to switch on"


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_the_encoder_gets_a_mask_it_need_not_read_and_computes_the_same(implementation):
    """A [B, T] mask makes transformers ask the GPU whether any position is padding, at every encoder call; the
    prepared [B, 1, 1, T] mask gives the same states without that question (eager attention keeps its own)."""
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM

    from distalign.models.attention import prepared_masks

    torch.manual_seed(0)
    config = XLMRobertaConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=40,
        attn_implementation=implementation,
    )
    plain = XLMRobertaForMaskedLM(config).eval()
    prepared = prepared_masks(XLMRobertaForMaskedLM(config).eval())
    prepared.load_state_dict(plain.state_dict())
    ids, mask = torch.randint(5, 50, (3, 7)), torch.ones(3, 7, dtype=torch.long)
    mask[0, 4:] = mask[2, 2:] = 0
    seen = []
    prepared.base_model.encoder.register_forward_pre_hook(
        lambda module, args, kwargs: seen.append(kwargs.get("attention_mask")), with_kwargs=True
    )
    expected = plain(input_ids=ids, attention_mask=mask).logits
    assert torch.allclose(prepared(input_ids=ids, attention_mask=mask).logits, expected, atol=1e-6)
    assert torch.allclose(
        prepared.base_model(input_ids=ids, attention_mask=mask).last_hidden_state,
        plain.base_model(input_ids=ids, attention_mask=mask).last_hidden_state,
        atol=1e-6,
    )
    if implementation == "sdpa":  # the prepared mask reached the layers as it was (transformers did not remake it)
        assert seen[0].dtype == torch.bool and seen[0].shape == (3, 1, 1, 7)


def _log(rank: int, port: int, results) -> None:
    import torch.distributed as dist

    from distalign.train.recipe import mean_across_ranks

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        results[("same", rank)] = mean_across_ranks({"Train/loss": float(rank), "perf/step_ms": 2.0})
        try:  # rank 1 logs a metric rank 0 does not: the sum would pair the wrong values or hang
            mean_across_ranks({"Train/loss": 1.0} | ({"Train/extra_loss": 1.0} if rank else {}))
        except RuntimeError as error:
            results[("differ", rank)] = str(error)
    finally:
        dist.destroy_process_group()


def test_ranks_that_log_different_metrics_are_told_so_instead_of_hanging():
    results = mp.Manager().dict()
    mp.start_processes(_log, args=(free_port(), results), nprocs=2, start_method="spawn")
    assert results[("same", 0)] == results[("same", 1)] == {"Train/loss": 0.5, "perf/step_ms": 2.0}
    for rank in (0, 1):
        assert "Train/extra_loss" in results[("differ", rank)]
