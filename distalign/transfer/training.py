"""``eval.transfer``: zero-shot transfer of a training run's models once training ends, logged into its MLflow run.

    distalign train jobs/configs/quickstart.yaml data.synthetic.transfer_examples=64 eval.transfer.tasks=[udpos] \\
        eval.transfer.starting_model=true 'eval.transfer.spec={seeds: 2, finetune: {lr: 1e-3, epochs: 5}}'

``check`` builds the transfer spec from the config (the task names, the spec's keys and values, the data folders)
before training takes any Ray resources: ``load_config`` runs it (registered with ``distalign.config`` here).
``transfer_after_training`` runs ``distalign transfer``'s protocol (``zero_shot.run_transfer``) on the starting model
(step 0), the checkpoints of ``at_steps`` and the selected (or last) checkpoint, in that order (a checkpoint in
remote storage is downloaded first), each logged into the training run at its step:
``transfer/<task>/<lang>/<metric>``, the fine-tuning runs as child runs of it, and per task a bar plot of every model
so far (``transfer/step_<n>/transfer_<task>.png``). ``distalign.studies.experiment.run_experiment`` runs it after
training, for ``distalign train`` and a study's trials; a Tune trial reports the final model's values, so a study
may select by them.

Why after training and not inside it: fine-tuning is a Ray Train run of its own per (task, seed); it starts once
the training workers have given their resources back.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from distalign.checkpoint import CHECKPOINT_DIR_PREFIX, STATE_FILE, parse_state, read_state
from distalign.config import (
    ConfigError,
    ExperimentConfig,
    apply_override,
    flatten,
    from_dict,
    register_section_check,
)
from distalign.data.synthetic import TRANSFER_TASK_NAMES
from distalign.transfer.plot import summary_metrics
from distalign.transfer.tasks.registry import TRANSFER_TASKS
from distalign.transfer.transfer_spec import TransferSpec, TransferTrackingConfig
from distalign.transfer.zero_shot import run_transfer, target_languages, validate

# TransferSpec keys the training run sets itself (eval.transfer.tasks / data_dir, its checkpoints, its MLflow run)
RUN_KEYS = ("model", "tasks", "data_dir", "output_dir", "storage_path", "tracking", "compare_to")
START_LABEL = "start"


def transfer_spec(config: ExperimentConfig, data_dir: str = "") -> TransferSpec | None:
    """The spec of the run's transfer evaluation, checked (None when ``eval.transfer.tasks`` is empty); errors name
    the ``eval.transfer`` key. ``data_dir``: the synthetic world's task folder, once it exists."""
    section = config.eval.transfer
    if not section.tasks:
        return None
    world = not section.data_dir
    for i, name in enumerate(section.tasks):
        known = TRANSFER_TASK_NAMES if world else tuple(TRANSFER_TASKS)
        if name not in known:
            raise ConfigError(
                f"eval.transfer.tasks[{i}]: {name!r} is not one of {list(known)}"
                + (" (the synthetic world's tasks; other tasks need eval.transfer.data_dir)" if world else "")
            )
    data: dict = {}
    for key, value in flatten(section.spec).items():
        if key.split(".")[0] in RUN_KEYS:
            raise ConfigError(
                f"eval.transfer.spec.{key}: set by the training run (eval.transfer.tasks, data_dir, "
                f"its checkpoints and MLflow run)"
            )
        apply_override(data, f"{key}={json.dumps(value)}", TransferSpec)
    spec = from_dict(TransferSpec, data, "eval.transfer.spec")
    if world and "source" not in data:
        spec.source = config.data.synthetic.languages[0]
    spec.tasks, spec.data_dir = tuple(section.tasks), data_dir or section.data_dir
    spec.model = "(the run's checkpoints)"
    spec.tracking = TransferTrackingConfig(uri=config.tracking.uri, experiment=config.tracking.experiment)
    try:
        validate(spec)
    except ConfigError as err:
        raise ConfigError(f"eval.transfer.spec: {err}") from err
    return spec


def check(config: ExperimentConfig) -> None:
    """Everything about ``eval.transfer`` that can be checked before training: the spec, and with a data folder
    its tasks' target languages (the splits themselves are read when the transfer starts)."""
    if not config.eval.transfer.data_dir:  # the synthetic world's tasks: written when the run prepares its data
        transfer_spec(config, data_dir="(the synthetic world's)")
        return
    spec = transfer_spec(config)
    for name in spec.tasks:
        try:
            target_languages(spec, name)
        except ValueError as err:
            raise ConfigError(f"eval.transfer: {err}") from err


register_section_check("eval.transfer", check)  # load_config runs it: a bad section fails before any training


def models_to_transfer(config: ExperimentConfig, run, outcome) -> list[tuple[str, str, int]]:
    """(label, model path, step) of each model to transfer, in the order they are run (and plotted)."""
    from distalign.tracking import START_MODEL_TAG

    section = config.eval.transfer
    models = []
    if section.starting_model:  # a stored one (s3://) as it is: each node that fine-tunes it stages its own copy
        models.append((START_LABEL, run.data.tags[START_MODEL_TAG], 0))
    if section.at_steps:
        kept = kept_checkpoints(config)
        for step in section.at_steps:
            if step not in kept:
                raise ConfigError(
                    f"eval.transfer.at_steps: no checkpoint of step {step} is kept (kept: "
                    f"{sorted(kept)}; checkpoints every train.checkpoint_every steps, "
                    f"storage.keep_checkpoints of them)"
                )
            models.append((f"step {step}", local_checkpoint(kept[step], config.storage.endpoint_url), step))
    final = outcome.best_checkpoint if section.checkpoint == "best" and outcome.best_checkpoint else outcome.checkpoint
    final = local_checkpoint(final, config.storage.endpoint_url)
    step = read_state(Path(final)).step
    models = [m for m in models if m[2] != step]  # an at_steps checkpoint that is also the final one: once
    return models + [(f"step {step} ({section.checkpoint})", final, step)]


def kept_checkpoints(config: ExperimentConfig) -> dict[int, str]:
    """Step -> path (local storage) or URI (remote storage) of each checkpoint the run keeps, read from each one's
    trainer state where it is stored."""
    import pyarrow.fs

    from distalign.storage import run_location

    fs, root, scheme = run_location(config.storage.path, config.storage.endpoint_url, config.run.name)
    kept = {}
    for info in fs.get_file_info(pyarrow.fs.FileSelector(root, allow_not_found=True)):
        if info.type == pyarrow.fs.FileType.Directory and info.base_name.startswith(CHECKPOINT_DIR_PREFIX):
            state = fs.get_file_info(f"{info.path}/{STATE_FILE}")
            if state.type == pyarrow.fs.FileType.File:  # a checkpoint still being written has none yet
                with fs.open_input_stream(state.path) as stream:
                    kept[parse_state(stream.read().decode()).step] = scheme + info.path
    return kept


def local_checkpoint(uri: str, endpoint_url: str) -> str:
    """A checkpoint directory here: itself when local, else a downloaded copy."""
    if "://" not in uri:
        return uri
    import ray.train

    from distalign.storage import ray_storage_path, storage_filesystem

    # without an endpoint, Ray reads the filesystem from the URI's scheme
    return ray.train.Checkpoint(
        ray_storage_path(uri, endpoint_url), storage_filesystem(uri, endpoint_url)
    ).to_directory()


def transfer_after_training(config: ExperimentConfig, outcome, progress=print) -> dict[str, float]:
    """Transfer the run's models (``models_to_transfer``), each logged into the run at its step; returns the final
    model's ``transfer/...`` metrics ({} when ``eval.transfer`` is off)."""
    from distalign.preparation.inputs import synthetic_world
    from distalign.tracking import client_for

    section = config.eval.transfer
    if not section.tasks:
        return {}
    spec = transfer_spec(config, "" if section.data_dir else str(synthetic_world(config).transfer_tasks))
    run = client_for(config.tracking.uri).get_run(outcome.run_id)
    out_dir = Path(config.data.output_dir).parent / "transfer"  # beside the run's data: <storage>/<run.name>/
    references, summary = {}, None
    for label, path, step in models_to_transfer(config, run, outcome):
        progress(f"[distalign transfer] {config.run.name}: {label}: {path}")
        step_spec = replace(spec, model=path, output_dir=str(out_dir / f"step_{step}"))
        summary, _ = run_transfer(
            step_spec, progress, dict(references), into=(outcome.run_id, step), endpoint_url=config.storage.endpoint_url
        )
        references[label] = summary
    return summary_metrics(summary)
