"""Every check a run makes before Ray, run together and reported together: ``distalign check`` runs them alone,
``train`` and ``tune`` before they take Ray resources.

    checked = load_checked("jobs/configs/quickstart.yaml", ["train.num_workers=4"])
    print("\\n".join(checked.found))

The checks: the config's values (``validate``), the tracking server answering (one short request: MLflow itself
retries for minutes), the storage writable, a resumed run's checkpoint fitting the config, the CPUs and GPUs of the
cluster (RAY_ADDRESS, else this machine) enough for the workers, and every input read and counted as the run reads
it (``prepare_data``: constraints, dictionaries, corpora, evaluation dictionaries, the model's config and
tokenizer, never its weights). A problem of one check does not stop the others: all are raised at once
(``distalign.errors.ConfigErrors``), each naming its key. Checks that read what a failed one names are skipped (no
inputs are read from a config whose values are wrong, nor a cache written in unwritable storage).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from distalign.config import ExperimentConfig, read_config, validate
from distalign.errors import ConfigError, Problems, require_writable
from distalign.model_store.locate import check_model, is_storage_uri
from distalign.models.loading import is_hub_name
from distalign.preparation.inputs import prepare_data
from distalign.preparation.prepared import PreparedData
from distalign.preparation.resume_checks import check_resume
from distalign.ray_session import available_resources
from distalign.storage import check_storage, node_local
from distalign.tracking import check_reachable


@dataclass
class Checked:
    """A config that passed every check, its inputs as read, and what the checks found, one line each
    (``distalign check`` prints them)."""

    config: ExperimentConfig
    prepared: PreparedData
    found: list[str] = field(default_factory=list)


def load_checked(path: str, overrides: list[str] | None = None, build_model: bool = True) -> Checked:
    """``read_config`` (a YAML or type error ends it there: nothing else can be read), then ``check_run`` with the
    config's own problems (``validate``) reported beside the others."""
    config = read_config(path, overrides)
    problems = Problems()
    with problems.check():
        validate(config)
    return check_run(config, problems, build_model)


def check_run(
    config: ExperimentConfig,
    problems: Problems | None = None,
    build_model: bool = True,
    resources: bool = True,
    prepared: PreparedData | None = None,
) -> Checked:
    """The checks of the module docstring on a loaded config; ``problems`` already found (its ``validate``) are
    raised with the rest. ``build_model=False``: the tiny model is not built
    (``prepare_data``); ``resources=False``: the cluster is not asked (a Tune trial's share of it is Tune's);
    ``prepared``: the config's inputs as another run of the same inputs prepared them (a study's trials share
    theirs: ``distalign.studies.shared_inputs``), not read again."""
    problems = problems if problems is not None else Problems()
    config_valid = not problems
    found = []
    with problems.check():
        check_reachable(config.tracking.uri)
        server = config.tracking.uri.startswith(("http://", "https://"))
        found.append(f"tracking: {config.tracking.uri} ({'answers' if server else 'a local store'})")
    storage_ok = False
    with problems.check():
        check_storage(config.storage.path, config.storage.endpoint_url)
        storage_ok = True
        found.append(f"storage: {config.storage.path} writable")
    if storage_ok:
        with problems.check():
            check_resume(config)
    if resources:
        with problems.check():
            found.append(check_resources(config))
    if config_valid and storage_ok and cache_writable(config, problems):
        with problems.check():
            prepared = prepared or prepare_data(config, build_model)
    elif is_hub_name(config.model.name_or_path) or is_storage_uri(config.model.name_or_path):
        # the inputs are not read; a model's look-up (Hub, storage) needs neither a valid config nor the storage (a
        # local directory is the config's own check)
        with problems.check():
            check_model(config.model.name_or_path, "model.name_or_path", config.storage.endpoint_url)
    problems.raise_any()
    objectives = ", ".join(f"{name}={weight:g}" for name, weight in config.objectives.weights().items())
    settings = f"config: objectives {objectives}; {config.train.num_workers} workers ({config.train.engine})"
    return Checked(config, prepared, [settings, *found, *describe_inputs(config, prepared)])


def cache_writable(config: ExperimentConfig, problems: Problems) -> bool:
    """Whether the cache that a synthetic world and a tiny model are built in (``data.cache_dir``) may be written,
    when the run builds either; the problem is added to ``problems`` otherwise."""
    if config.data.source != "synthetic" and config.model.name_or_path != "tiny":
        return True
    with problems.check():
        require_writable(Path(config.data.cache_dir), "data.cache_dir")
        return True
    return False


def needed_resources(config: ExperimentConfig) -> tuple[int, float, int]:
    """(workers, CPUs, GPUs) the run needs at the least: ``train.min_workers`` (else ``train.num_workers``) workers
    of ``train.cpus_per_worker`` each, plus ``data.corpus_cpus_per_worker`` each for the corpus stream's tasks when an
    objective reads the corpus, plus ``data.tokenize_cpus`` for one task of the table streams (constraints, static,
    parallel); a GPU per worker with ``train.use_gpu``."""
    t, d, streams = config.train, config.data, config.objectives.streams()
    workers = t.min_workers or t.num_workers
    cpus = workers * (t.cpus_per_worker + (d.corpus_cpus_per_worker if "corpus" in streams else 0))
    cpus += d.tokenize_cpus if streams - {"corpus"} else 0
    return workers, cpus, workers if t.use_gpu else 0


def check_resources(config: ExperimentConfig) -> str:
    """A ``ConfigError`` naming ``train.num_workers`` when the cluster (``available_resources``) has fewer CPUs or
    GPUs than ``needed_resources``; else the line saying what was found."""
    workers, cpus, gpus = needed_resources(config)
    try:
        have, where = available_resources(gpus > 0)
    except Exception as err:  # an address that does not answer (``answering``), or Ray's own errors joining it
        raise ConfigError(
            f"train.num_workers: the Ray cluster in RAY_ADDRESS cannot be joined to count its CPUs "
            f"and GPUs ({type(err).__name__}: {err}): start it, or unset RAY_ADDRESS to run on this "
            "machine"
        ) from None
    t, d = config.train, config.data
    need = (
        f"{workers} workers need {cpus:g} CPUs (train.cpus_per_worker={t.cpus_per_worker:g}, "
        f"data.corpus_cpus_per_worker={d.corpus_cpus_per_worker:g} each, data.tokenize_cpus={d.tokenize_cpus:g})"
        + (f" and {gpus} GPUs (train.use_gpu)" if gpus else "")
    )
    if have["CPU"] < cpus or have["GPU"] < gpus:
        raise ConfigError(
            f"train.num_workers: {need}; {where} has {have['CPU']:g} CPUs and {have['GPU']:g} GPUs: "
            "lower train.num_workers (or train.min_workers) or the CPUs per worker, or add nodes"
        )
    return f"resources: {need}; {where} has {have['CPU']:g} CPUs, {have['GPU']:g} GPUs"


def describe_inputs(config: ExperimentConfig, prepared: PreparedData) -> list[str]:
    """What the run will read, counted: the lines of ``distalign check``'s report after the services'."""
    t = config.train
    lines = [f"model: {describe_model(config, prepared)}"]
    if len(prepared.constraints) or "constraints" in config.objectives.streams():
        lines.append(
            f"constraints: {len(prepared.constraints)} pairs ({prepared.excluded_constraints} with evaluation "
            f"words left out; at least train.constraint_batch_size x train.num_workers = "
            f"{t.constraint_batch_size * t.num_workers} needed): {pair_counts(prepared.constraints)}"
        )
    for source in prepared.corpus.sources:
        where = (
            f"{source.hf_dataset} (Hugging Face dataset)"
            if source.kind == "hf"
            else f"{len(source.paths)} {source.kind} files, {size_text(sum(source.sizes))}"
        )
        lines.append(f"corpus {source.lang}: {where}")
    if prepared.validation is not None:
        lines.append(f"validation sentences: {len(prepared.validation)}")
    if prepared.parallel is not None:
        lines.append(
            f"parallel pairs: {len(prepared.parallel)} (at least train.parallel_batch_size x "
            f"train.num_workers = {t.parallel_batch_size * t.num_workers} needed)"
        )
    if prepared.static is not None:
        lines.append(f"static targets: {len(prepared.static)} words")
    for name, pairs in (
        ("evaluation (in-loop BLI)", prepared.eval_pairs),
        ("test (BLI after training)", prepared.test_pairs),
    ):
        if pairs:
            lines.append(f"{name}: " + ", ".join(f"{p.lang1}-{p.lang2} {len(p.src)} pairs" for p in pairs))
    if config.eval.transfer.tasks:
        lines.append(f"transfer after training: {', '.join(config.eval.transfer.tasks)}")
    if prepared.malformed_rows:
        lines.append(f"malformed rows skipped: {prepared.malformed_rows} (warnings above name them)")
    return lines


def describe_model(config: ExperimentConfig, prepared: PreparedData) -> str:
    if prepared.model_path == "tiny":
        tiny = config.model.tiny
        return (
            f"tiny, built when training starts (hidden size {tiny.hidden_size}, {tiny.num_layers} layers, its "
            f"tokenizer of {tiny.vocab_size} tokens trained on the run's text)"
        )
    from distalign.models.loading import load_tokenizer, max_model_positions

    local = node_local(prepared.model_path, config.storage.endpoint_url)  # a storage model: this node's copy
    return (
        f"{config.model.name_or_path}: config and tokenizer load ({len(load_tokenizer(local))} "
        f"tokens, {max_model_positions(local)} positions)"
    )


def pair_counts(table: pa.Table) -> str:
    """Rows per language pair, ``xa-xb 412, xa-xc 398``."""
    counts = table.group_by(["lang1", "lang2"]).aggregate([([], "count_all")]).to_pylist()
    return ", ".join(sorted(f"{row['lang1']}-{row['lang2']} {row['count_all']}" for row in counts)) or "none"


def size_text(size: float) -> str:
    """``1536`` -> ``1.5 KiB``."""
    units = ("bytes", "KiB", "MiB", "GiB", "TiB")
    power = 0
    while size >= 1024 and power < len(units) - 1:
        size, power = size / 1024, power + 1
    return f"{size:.0f} bytes" if power == 0 else f"{size:.1f} {units[power]}"
