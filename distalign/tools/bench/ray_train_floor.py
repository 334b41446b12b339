"""The bare Ray Train floor of ``distalign bench startup``: the least a Ray Train job does before its first step.

It starts (or joins, with RAY_ADDRESS) Ray, runs a ``TorchTrainer`` of two CPU workers that each import torch and
transformers, build a 2-layer BERT (the quickstart's tiny sizes), wrap it in DDP and take one optimizer step, and
prints, as JSON, the seconds from this process's start to the end of that step (rank 0's clock).

    python -m distalign.tools.bench.ray_train_floor --workers 2

It imports nothing of distalign's: a user's own script would not.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def one_step(config: dict) -> None:
    import torch
    import transformers
    from ray import train
    from ray.train.torch import prepare_model

    torch.manual_seed(0)
    model: torch.nn.Module = transformers.BertForMaskedLM(
        transformers.BertConfig(
            vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128
        )
    )
    model = prepare_model(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(5, 1000, (16, 32))  # host-side: the floor runs on CPU workers only
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    if train.get_context().get_world_rank() == 0:
        # Train V2 keeps no metrics without a checkpoint: the time goes back through a file
        Path(config["result"]).write_text(json.dumps({"first_step_at": time.time()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    import psutil
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    started = psutil.Process().create_time()
    ray.init(address=os.environ.get("RAY_ADDRESS") or "local")
    with tempfile.TemporaryDirectory() as scratch:
        result = Path(scratch) / "result.json"
        TorchTrainer(
            one_step,
            train_loop_config={"result": str(result)},
            scaling_config=ScalingConfig(num_workers=args.workers),
            run_config=RunConfig(name="floor", storage_path=scratch),
        ).fit()
        first_step_at = json.loads(result.read_text())["first_step_at"]
    ray.shutdown()
    print(json.dumps({"total_s": first_step_at - started}))


if __name__ == "__main__":
    main()
