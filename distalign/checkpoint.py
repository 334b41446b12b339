"""The checkpoint format, read by training (resume), evaluation and benchmarks; written by training.

One directory per checkpoint, merged by Ray Train from all ranks:

    trainer_state.json   step, MLflow run id, the vanilla model's validation MRRs (rank 0)
    config.yaml          the run's experiment config (rank 0): ``distalign eval --checkpoint`` repeats its in-loop
                         BLI settings from it
    model/               Hugging Face model + tokenizer, loadable by ``from_pretrained`` (rank 0);
                         with adapters, the base model plus adapters.safetensors/json beside it; with
                         DICT-MLM, its input language table as language_embeddings.safetensors/json
    objectives.pt        parameters and state owned by objectives, not exported with the model (rank 0):
                         DICT-MLM's language embeddings and head, sense vectors
    optimizer.pt         DDP optimizer and LR schedule (rank 0)
    deepspeed/           DeepSpeed engine state without the weights (``model/`` holds them), ZeRO shards from every
                         rank (a rank reads only its own on a resume: ``private_rank``)
    rng_state.{rank}.pt  every rank's random state
    streams.{rank}.json  where every rank's streams stand (``StreamBatches.state``): a resume continues there
    files.{rank}.json    every rank's files with their sizes and CRC-32 checksums, written last, by the upload (rank 0's
                         also holds the world size): a checkpoint is complete when every rank's list is there and
                         every file it names has its size, whatever order the storage received the files in; a
                         file corrupted in storage, not only cut short, shows up by its checksum when it is read
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import yaml

from distalign.models.adapters import save_pretrained_with_adapters
from distalign.models.language_embeddings import save_input_languages

CHECKPOINT_DIR_PREFIX = "checkpoint_"  # a checkpoint's folder in the run's storage: checkpoint_<date>_<time>
STATE_FILE = "trainer_state.json"
CONFIG_FILE = "config.yaml"
OBJECTIVES_FILE = "objectives.pt"
MODEL_DIR = "model"
OPTIMIZER_FILE = "optimizer.pt"
DEEPSPEED_DIR = "deepspeed"
RNG_FILE = "rng_state.{rank}.pt"  # every rank's random state (dropout), so a resume draws what the run would have
MANIFEST_FILE = "files.{rank}.json"
STREAMS_FILE = "streams.{rank}.json"
# the files one rank alone reads on a resume: its random state, and its ZeRO shards (DeepSpeed's
# ``[bf16_]zero_pp_rank_<rank>_mp_rank_<mp>_{optim,model}_states.pt``)
PRIVATE_FILE = re.compile(r"(?:^|/)(?:rng_state\.(\d+)\.pt|(?:bf16_)?zero_pp_rank_(\d+)_[^/]*)$")


@dataclass
class TrainerState:
    step: int = 0
    mlflow_run_id: str = ""
    baseline_mrr: dict[str, float] = field(default_factory=dict)  # per pair, before training (model selection)


def write_state(directory: Path, state: TrainerState) -> None:
    (directory / STATE_FILE).write_text(json.dumps(asdict(state)))


def read_state(directory: Path) -> TrainerState:
    return parse_state((directory / STATE_FILE).read_text())


def parse_state(text: str) -> TrainerState:
    """A trainer state from its JSON (``STATE_FILE``'s content)."""
    return TrainerState(**json.loads(text))


def read_config_mapping(directory: Path) -> dict | None:
    """The run config a checkpoint was saved with (``CONFIG_FILE``, as a mapping), or None (an older checkpoint)."""
    path = directory / CONFIG_FILE
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def write_rank0_files(
    directory: Path,
    masked_lm,
    tokenizer,
    objective_state: dict,
    state: TrainerState,
    model_weights: dict | None = None,
    input_table: tuple[str, list[str]] | None = None,
    config: dict | None = None,
) -> None:
    """Everything rank 0 writes (the engine writes optimizer state or ZeRO shards itself); ``config``: the run's
    experiment config as a mapping (``ExperimentConfig.to_dict``); ``model_weights``
    replaces ``masked_lm``'s own state dict (ZeRO-3: gathered to rank 0, the module holds only partitions).
    ``input_table``: (its key in ``objective_state``, the run's languages), a language table exported beside
    the model."""
    save_pretrained_with_adapters(masked_lm, directory / MODEL_DIR, model_weights)
    tokenizer.save_pretrained(directory / MODEL_DIR)
    if input_table is not None:
        key, languages = input_table
        save_input_languages(directory / MODEL_DIR, objective_state[key], languages, key.split(".", 1)[0])
    if objective_state:
        torch.save(objective_state, directory / OBJECTIVES_FILE)
    if config is not None:
        (directory / CONFIG_FILE).write_text(yaml.safe_dump(config, sort_keys=False))
    write_state(directory, state)


def write_rng_state(directory: Path, rank: int) -> None:
    state = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    torch.save(state, directory / RNG_FILE.format(rank=rank))


def restore_rng_state(directory: Path, rank: int) -> None:
    """This rank's random state from a checkpoint, if it has one (checkpoints before it do not)."""
    path = directory / RNG_FILE.format(rank=rank)
    if not path.is_file():
        return
    state = torch.load(path, weights_only=True)
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def write_stream_states(directory: Path, rank: int, states: dict[str, dict]) -> None:
    (directory / STREAMS_FILE.format(rank=rank)).write_text(json.dumps(states))


def read_stream_states(directory: Path) -> dict[str, list[dict]] | None:
    """Each stream's state on every rank of the run that wrote the checkpoint (rank order); None for a
    checkpoint from before stream states (its streams replay the batches trained on)."""
    world_size = json.loads((directory / MANIFEST_FILE.format(rank=0)).read_text())["world_size"]
    paths = [directory / STREAMS_FILE.format(rank=rank) for rank in range(world_size)]
    if not all(p.is_file() for p in paths):
        return None
    states = [json.loads(p.read_text()) for p in paths]
    return {name: [s[name] for s in states] for name in states[0]}


def read_objective_state(directory: Path) -> dict | None:
    """Objective-owned parameters and state of a checkpoint, if it has any."""
    path = directory / OBJECTIVES_FILE
    return torch.load(path, map_location="cpu", weights_only=True) if path.is_file() else None  # no code runs


def restore_objective_state(objectives: torch.nn.ModuleDict, state: dict) -> list[str]:
    """Load each active objective's checkpointed state. The state of an objective no longer in the run is left
    out, and an objective new to the run keeps its initial state: a resume may change the objective mix.
    Returns what happened, for the log."""
    saved = {key.split(".", 1)[0] for key in state}
    notes = [
        f"objective '{name}' is not in this run: its checkpointed state is left out"
        for name in sorted(saved - set(objectives))
    ]
    for name, objective in objectives.items():
        own = {key.split(".", 1)[1]: value for key, value in state.items() if key.split(".", 1)[0] == name}
        if own:
            objective.load_state_dict(own)
        elif objective.state_dict():
            notes.append(f"objective '{name}' is new to this run: it starts from its initial state")
    return notes


def crc32(path: Path) -> int:
    value = 0
    with open(path, "rb") as f:
        while chunk := f.read(2**20):
            value = zlib.crc32(chunk, value)
    return value


def write_manifest(directory: Path, rank: int, world_size: int) -> None:
    """List this rank's files in its checkpoint directory with their sizes and checksums; call it after
    everything else."""
    files = {
        p.relative_to(directory).as_posix(): {"size": p.stat().st_size, "crc32": crc32(p)}
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }
    manifest = {"files": files, **({"world_size": world_size} if rank == 0 else {})}
    (directory / MANIFEST_FILE.format(rank=rank)).write_text(json.dumps(manifest))


def private_rank(name: str) -> int | None:
    """The rank that alone reads the checkpoint file ``name`` on a resume (its random state, its ZeRO shards:
    DeepSpeed loads only its own rank's); None for a file every rank reads."""
    found = PRIVATE_FILE.search(name)
    return None if found is None else int(found.group(1) or found.group(2))


def manifest_files(
    read_manifest: Callable[[str], str | None], stored: dict[str, int]
) -> tuple[dict[str, dict], list[str]]:
    """Every file a checkpoint's manifests list (name -> its size and checksum, the manifests themselves included
    with their sizes), and what the checkpoint lacks (empty when complete): a rank's manifest, a file it lists, or
    one of another size among the ``stored`` files (name -> size, from a listing of the checkpoint: nothing else is
    read). ``read_manifest(name)``: a manifest's text, None where it is missing. A checkpoint cut short while it was
    being written shows up here; a file corrupted in storage, not cut short, shows up when it is read
    (``checksum_problem``)."""
    texts = {0: read_manifest(MANIFEST_FILE.format(rank=0))}
    if texts[0] is None:
        return {}, [MANIFEST_FILE.format(rank=0)]
    world_size = json.loads(texts[0])["world_size"]
    texts.update({rank: read_manifest(MANIFEST_FILE.format(rank=rank)) for rank in range(1, world_size)})
    files, problems = {}, []
    for rank, text in texts.items():
        manifest = MANIFEST_FILE.format(rank=rank)
        if text is None:
            problems.append(manifest)
            continue
        files[manifest] = {"size": stored[manifest]}
        for name, listed in json.loads(text)["files"].items():
            listed = listed if isinstance(listed, dict) else {"size": listed}  # checkpoints before checksums
            files[name] = listed
            if name not in stored:
                problems.append(name)
            elif stored[name] != listed["size"]:
                problems.append(f"{name} ({stored[name]} of {listed['size']} bytes)")
    return files, problems


def checksum_problem(name: str, listed: dict, crc: int) -> str | None:
    """What is wrong with a file read whole with checksum ``crc`` (None when it matches what its manifest lists)."""
    if "crc32" in listed and crc != listed["crc32"]:
        return f"{name} (checksum differs: corrupted)"
    return None
