"""A ZeRO-2 checkpoint of two gloo ranks, on S3 (moto's server), read back on a resume: each rank reads its own
shard and random state and the shared files, never the other rank's; the shared files come down once per node.
Bytes are counted per object and per rank from the server's request log (moto's recorder: each rank signs with an
access key of its own, and a ranged GET names its bytes). The resumed ranks hold the weights and optimizer state
they saved, and step on as the ranks that saved them.

Issue 47: every rank downloaded and checksummed the whole checkpoint (~1.15 TB from S3 for one resume of XLM-R
large on 128 workers).
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections import Counter
from urllib.parse import urlsplit

import pytest
import torch
import torch.multiprocessing as mp
from conftest import QUICKSTART, SMALL, free_port, moto_s3_server

from distalign.checkpoint import private_rank
from distalign.config import load_config
from distalign.preparation.inputs import prepare_data

pytestmark = pytest.mark.heavy
ROOT = "ckpt/runs/zero2/checkpoint_000001"  # bucket/prefix, as Ray Train lays a run's checkpoints out
LAYOUTS = {"one node": lambda rank: ("shared", rank), "two nodes": lambda rank: (f"node{rank}", 0)}


def _rank(rank: int, port: int, url: str, run, caches: str, out) -> None:
    import pyarrow.fs
    import ray.train
    import requests
    import torch.distributed as dist

    from distalign.preparation.ray_streams import local_streams
    from distalign.storage import s3_filesystem
    from distalign.train.recipe import TrainingRecipe
    from distalign.train.resume import resumed_from
    from distalign.train.trainer import plan_training
    from distalign.train.uploads import CheckpointUploads

    os.environ.update(
        {
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "AWS_ACCESS_KEY_ID": f"rank{rank}",
            "AWS_SECRET_ACCESS_KEY": "testing",
        }
    )  # the log's signer
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2, timeout=datetime.timedelta(seconds=120)
    )
    try:
        config, prepared = run
        plan = plan_training(config, prepared, mlflow_run_id="")
        saved = TrainingRecipe(plan, rank, 2)
        saved.setup()
        streams = local_streams(prepared, config)
        saved.step([saved.next_batches(streams)])
        uploads, fs = CheckpointUploads(rank, 2), s3_filesystem(url)
        directory = uploads.new_directory()
        saved.save(directory)
        uploads.start(directory, lambda: pyarrow.fs.copy_files(str(directory), ROOT, pyarrow.fs.LocalFileSystem(), fs))
        uploads.wait()
        assert not directory.exists()  # removed once uploaded
        batches = [saved.next_batches(streams)]
        random_state = torch.get_rng_state()
        dist.barrier()
        resumed = None
        for layout, placed in LAYOUTS.items():
            node, local_rank = placed(rank)  # the node (its cache) and the rank on it
            if rank == 0:
                requests.post(f"{url}/moto-api/recorder/start-recording", timeout=10).raise_for_status()
            dist.barrier()
            os.environ["DISTALIGN_CACHE"] = f"{caches}/{node}"
            resumed = TrainingRecipe(plan, rank, 2)
            with resumed_from([ray.train.Checkpoint(ROOT, fs)], rank, local_rank) as resume_dir:
                resumed.setup(resume_dir)
            dist.barrier()
            if rank == 0:
                requests.post(f"{url}/moto-api/recorder/stop-recording", timeout=10).raise_for_status()
                recording = requests.get(f"{url}/moto-api/recorder/download-recording", timeout=10)
                out[layout] = recording.text
                requests.post(f"{url}/moto-api/recorder/reset-recording", timeout=10).raise_for_status()
            out[f"{layout} cache left {rank}"] = (
                sorted(os.listdir(f"{caches}/{node}/checkpoints"))
                if os.path.isdir(f"{caches}/{node}/checkpoints")
                else []
            )
        differing = [
            name
            for (name, a), b in zip(saved.engine.module.named_parameters(), resumed.engine.module.parameters())
            if not torch.equal(a, b)
        ]
        # this rank's partition of the fp32 master weights and of AdamW's state: what its own shard restored
        for group, (a, b) in enumerate(
            zip(*(recipe.engine.engine.optimizer.single_partition_of_fp32_groups for recipe in (saved, resumed)))
        ):
            states = [recipe.engine.engine.optimizer.optimizer.state[p] for recipe, p in ((saved, a), (resumed, b))]
            if not torch.equal(a, b) or any(not torch.equal(states[0][key], states[1][key]) for key in states[0]):
                differing.append(f"partition {group}")
        losses = []
        for recipe in (saved, resumed):  # the next step, from the same random state, on the same batches
            torch.set_rng_state(random_state)
            losses.append(float(recipe.step(batches)["Train/loss"]))
        out[rank] = {"differing": differing, "losses": losses}
    finally:
        dist.destroy_process_group()


def bytes_read(recording: str) -> dict[str, Counter]:
    """Bytes each signer's GETs of objects asked for, per object (key under ``ROOT``): a ranged GET its range, a
    GET without one the whole object (none here: pyarrow reads in ranges)."""
    read: dict[str, Counter] = {}
    for line in recording.splitlines():
        entry = json.loads(line)
        path = urlsplit(entry["url"]).path
        if entry["method"] != "GET" or not path.startswith(f"/{ROOT}/"):
            continue  # listings, HEADs, the moto API
        headers = {key.lower(): value for key, value in entry["headers"].items()}
        signer = re.search(r"Credential=([^/]+)/", headers["authorization"]).group(1)
        first, last = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", headers["range"]).groups())
        read.setdefault(signer, Counter())[path.removeprefix(f"/{ROOT}/")] += last - first + 1
    return read


def test_each_rank_reads_its_own_zero_shards_and_the_shared_files_once_per_node(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_HOME", str(tmp_path))
    monkeypatch.setenv("MOTO_RECORDER_FILEPATH", str(tmp_path / "moto-recording"))  # read by the server
    config = load_config(QUICKSTART, [*SMALL, "train.engine=deepspeed", "train.zero_stage=2"])
    run = (config, prepare_data(config))
    with moto_s3_server("ckpt") as (url, s3):
        results = mp.Manager().dict()
        # spawn, not fork: a child forked after this process ran autograd can deadlock in its backward
        mp.start_processes(
            _rank, args=(free_port(), url, run, str(tmp_path / "caches"), results), nprocs=2, start_method="spawn"
        )
        prefix = ROOT.split("/", 1)[1] + "/"
        stored = {
            item["Key"].removeprefix(prefix): item["Size"]
            for item in s3.list_objects_v2(Bucket="ckpt", Prefix=prefix)["Contents"]
        }
    shards = {name for name in stored if "zero_pp_rank_" in name}
    assert {private_rank(name) for name in shards} == {0, 1}
    shared = {name for name in stored if private_rank(name) is None}
    assert "model/model.safetensors" in shared and "trainer_state.json" in shared
    states = next(name for name in stored if name.endswith("mp_rank_00_model_states.pt"))
    assert stored[states] < stored["model/model.safetensors"] / 4  # DeepSpeed's model states hold no weights

    for layout, nodes in (("one node", 1), ("two nodes", 2)):
        read = bytes_read(results[layout])
        for rank in (0, 1):
            own = {name for name in stored if private_rank(name) == rank}
            mine = read[f"rank{rank}"]
            assert own <= set(mine), (layout, rank)
            assert {name for name in mine if private_rank(name) is not None} == own, (layout, rank)
            assert all(mine[name] == stored[name] for name in own), (layout, rank)
        # the shared files: each read whole, once per node; the manifests (a few KB) by every rank
        reads = Counter()
        for counter in read.values():
            reads.update({name: count for name, count in counter.items() if name in shared})
        manifests = {name for name in shared if re.fullmatch(r"files\.\d+\.json", name)}
        assert reads == Counter({name: (2 if name in manifests else nodes) * stored[name] for name in shared}), layout
        assert results[f"{layout} cache left 0"] == [] and results[f"{layout} cache left 1"] == []

    for rank in (0, 1):
        assert results[rank]["differing"] == []
        saved_loss, resumed_loss = results[rank]["losses"]
        assert saved_loss == pytest.approx(resumed_loss, abs=1e-6)
