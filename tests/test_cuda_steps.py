"""The emulation's claims on a real GPU (``make gpu-check`` runs these; skipped without CUDA): every objective's
steady-state step through the real recipe on CUDA (an NCCL group of one), in bf16 autocast, with host syncs counted
by CUDA's own sync debugging (``torch.cuda.set_sync_debug_mode``) against the emulation's budget
(``test_device_emulation.SYNC_BUDGET``); batches reach the device from pinned memory.
"""

from __future__ import annotations

import warnings

import pytest
import torch
from conftest import SMALL, free_port

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def nccl_group():
    """An NCCL group of one; the TF32 settings the recipes turn on are put back after (later tests compare CUDA
    with CPU results at fp32 tolerances: the first GPU check failed one that way)."""
    import torch.distributed as dist

    torch.cuda.set_device(0)
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def cuda_syncs(call) -> list[str]:
    """The synchronizing CUDA operations ``call`` makes (CUDA's sync debug mode, as warnings), one line each."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            call()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return [
        f"{w.filename}:{w.lineno}: {str(w.message)[:120]}"
        for w in caught
        if "called a synchronizing CUDA operation" in str(w.message)
    ]  # (not the mode's own prototype notice)


@pytest.mark.parametrize(
    "name", ["mlm", "lexical_type", "lexical_sense", "align_mlm", "dict_mlm", "static_align", "sense_aware", "tlm"]
)
def test_a_steady_state_step_on_cuda_stays_within_the_emulation_s_sync_budget(name, nccl_group, distalign_home):
    from test_device_emulation import OBJECTIVES, SYNC_BUDGET, WARMUP_STEPS, _parallel_pairs

    from distalign.config import load_config
    from distalign.device import to_device
    from distalign.preparation.inputs import prepare_data
    from distalign.preparation.ray_streams import local_streams
    from distalign.train.recipe import TrainingRecipe
    from distalign.train.trainer import plan_training

    path, overrides = OBJECTIVES[name]
    overrides = [o.replace("PAIRS", _parallel_pairs(str(distalign_home))) for o in overrides]
    config = load_config(
        path,
        SMALL + overrides + [f"run.name=cuda-{name.replace('_', '-')}", "train.use_gpu=true", "train.precision=bf16"],
    )
    prepared = prepare_data(config)
    recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""), device=torch.device("cuda", 0))
    recipe.setup()
    assert torch.backends.cuda.matmul.allow_tf32  # the recipe's setup turned TF32 on for its CUDA device
    streams = local_streams(prepared, config)
    for _ in range(WARMUP_STEPS):
        recipe.step([recipe.next_batches(streams)])
    batches = [recipe.next_batches(streams)]  # host work, before the counted step
    assert all(t.device.type == "cpu" for b in batches[0].values() for t in b.values())
    moved = to_device(next(iter(batches[0].values())), torch.device("cuda", 0))
    assert all(t.device.type == "cuda" for t in moved.values())
    syncs = cuda_syncs(lambda: recipe.step(batches))
    print(f"\n{name}: {len(syncs)} CUDA syncs in a steady-state step" + "".join(f"\n  {s}" for s in syncs))
    assert len(syncs) <= SYNC_BUDGET[name], syncs
