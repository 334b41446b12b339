"""The experiment configuration: typed dataclasses, YAML in, dotted ``key=value`` overrides.

Everything a run needs is in one ``ExperimentConfig``. ``load_config`` validates it completely
(unknown keys, wrong types, missing files, impossible values) before any Ray resources are taken,
and every error names the dotted key that is wrong.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from distalign.data.sources import CorpusSource, DictionarySource, StaticVectorsSource
from distalign.data.synthetic import SyntheticConfig
from distalign.errors import ConfigError, require
from distalign.models.loading import TinyModelConfig


# --------------------------------------------------------------------------------------------
# Sections


@dataclass
class AdaptersConfig:
    # Bottleneck adapters in every layer (BabelBERT's adapter variant); only adapters are trained.
    enabled: bool = False
    reduction_factor: int = 16  # adapter width = hidden size / reduction_factor
    non_linearity: str = "relu"
    # pfeiffer: after the FFN sublayer's Add & Norm (BabelBERT's PfeifferConfig); houlsby: before it
    placement: Literal["pfeiffer", "houlsby"] = "pfeiffer"
    # bert: N(0, 0.02) weights in both projections (adapter-transformers' default, BabelBERT's); identity: a
    # zero up-projection, so the adapted model starts as the base model
    init: Literal["bert", "identity"] = "bert"


@dataclass
class ModelConfig:
    # Hub name (bert-base-multilingual-uncased, xlm-roberta-base), local HF directory, or "tiny".
    name_or_path: str = "tiny"
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    # Layer whose subword states are mean-pooled into word vectors (-1 = last, 0 = embeddings).
    word_layer: int = -1
    max_word_tokens: int = 16  # subword budget of a word encoded alone ([CLS] word [SEP])
    adapters: AdaptersConfig = field(default_factory=AdaptersConfig)


@dataclass
class DataConfig:
    # "synthetic" generates the whole world; "files" reads the sources below.
    source: Literal["synthetic", "files"] = "synthetic"
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    # Constraint files: parquet in the constraint schema, or a BabelNet export (.tsv).
    constraints: list[str] = field(default_factory=list)
    dictionaries: list[DictionarySource] = field(default_factory=list)  # training dictionaries
    eval_dictionaries: list[DictionarySource] = field(default_factory=list)  # held-out BLI pairs
    corpora: list[CorpusSource] = field(default_factory=list)
    static_vectors: list[StaticVectorsSource] = field(default_factory=list)  # targets of objectives.static
    max_constraints: int = 0  # constraint-set size: a subset keeping the full set's language-pair shares (0 = all)
    # a language sample (BabelBERT §5.1): only constraints between these languages (empty = all) ...
    constraint_languages: list[str] = field(default_factory=list)
    constraints_per_pair: int = 0  # ... and exactly this many per language pair (0 = as they come)
    sampling_alpha: float = 0.5  # batches draw language pair k with q ∝ p^alpha (BabelBERT)
    # Corpus sentences of language l make up q_l ∝ p_l^alpha of an epoch (p_l: share of the corpus bytes; mBERT
    # and XLM-R smooth with 0.7 and 0.3) by keeping a seeded share of the larger languages' sentences; 1 = as is
    corpus_sampling_alpha: float = 1.0
    dictionary_fraction: float = 1.0  # share of the (sampled) pairs used in training (ALIGN-MLM's dictionary size)
    max_seq_length: int = 64
    # Corpus sequences: consecutive sentences of one language packed up to max_seq_length tokens (BERT's and
    # ALIGN-MLM's pre-training instances), else one sentence a sequence, padded
    pack_sequences: bool = False
    shuffle_buffer_rows: int = 10000  # corpus rows a worker mixes in its seeded local shuffle buffer (0 = off)
    # CPUs per Ray Data task of the constraint and static streams: fractional so a small machine running Train workers
    # (and a Tune trial) still has room for data tasks, which otherwise wait forever.
    tokenize_cpus: float = 0.25
    # CPUs each worker reserves (a placement group) for its corpus stream's Ray Data tasks, which run four
    # at a time in them (raise it on GPU nodes with CPUs to spare, e.g. 4)
    corpus_cpus_per_worker: float = 0.25
    output_dir: str = ""  # where generated data goes (default: <storage.path>/<run.name>/data)
    # synthetic worlds and tiny models shared between runs and trials, one per content hash
    # (default: <storage.path>/cache with local storage, else <DISTALIGN_HOME>/cache on the driver)
    cache_dir: str = ""


class ObjectivesConfig(dict):
    """``objectives.<name>`` sections by name, each the ``Config`` dataclass of its plugin.

    Every plugin of ``distalign.objectives.registry.OBJECTIVES`` has a section (defaults where the
    YAML names none); ``plugins`` keeps the plugin classes so workers need no registry lookup.
    """

    def __init__(self, sections: dict[str, Any] | None = None, plugins: dict[str, type] | None = None):
        super().__init__(sections or {})
        self.plugins = dict(plugins or {})

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no objective section '{name}'") from None

    def active(self) -> dict[str, tuple[type, Any]]:
        """name -> (plugin, section) of every objective with weight > 0."""
        return {name: (self.plugins[name], section) for name, section in self.items() if section.weight > 0}

    def weights(self) -> dict[str, float]:
        """name -> weight of every active objective."""
        return {name: section.weight for name, (_, section) in self.active().items()}

    def streams(self) -> set[str]:
        return {plugin.stream for plugin, _ in self.active().values()}

    @property
    def uses_word_pairs(self) -> bool:
        """Whether an active objective reads the run's training word pairs (in its worker or preparer)."""
        return any(plugin.uses_word_pairs for plugin, _ in self.active().values())


def _registered_objectives() -> dict[str, type]:
    from distalign.objectives import registry  # read at call time: a test may register a plugin

    return dict(registry.OBJECTIVES)


def default_objectives() -> ObjectivesConfig:
    plugins = _registered_objectives()
    return ObjectivesConfig({name: plugin.Config() for name, plugin in plugins.items()}, plugins)


def objectives_from_dict(data: Any, key: str = "objectives") -> ObjectivesConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{key}: expected a mapping, got {type(data).__name__} {data!r}")
    objectives = default_objectives()
    for name, section in data.items():
        if name not in objectives.plugins:
            raise ConfigError(f"unknown key '{key}.{name}' (allowed here: {', '.join(sorted(objectives.plugins))})")
        objectives[name] = _coerce(section, objectives.plugins[name].Config, f"{key}.{name}")
    return objectives


@dataclass
class TrainConfig:
    num_workers: int = 2
    cpus_per_worker: float = 0.5  # fractional on small machines so Ray Data keeps CPUs
    # Ray placement of the workers: PACK (fill nodes), SPREAD, STRICT_PACK, STRICT_SPREAD (one per node)
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    use_gpu: bool = False
    engine: Literal["ddp", "deepspeed"] = "ddp"
    zero_stage: int = 0  # DeepSpeed ZeRO stage 0-3
    precision: Literal["fp32", "bf16"] = "fp32"
    # adamw, or lamb (You et al. 2020; DICT-MLM §3.1): a per-tensor trust ratio, for batches of thousands
    optimizer: Literal["adamw", "lamb"] = "adamw"
    lr: float = 5e-4
    weight_decay: float = 0.01
    warmup_steps: int = 10
    lr_schedule: Literal["linear", "constant"] = "linear"  # after warm-up: linear decay to 0, or constant
    max_steps: int = 200
    epochs: float = 0.0  # > 0: train this many epochs of the main stream instead (sets max_steps from the data)
    # Micro-batches per optimizer step: effective batch = workers x batch size x grad_accum_steps. Contrastive
    # sets (InfoNCE positives and negatives, Deep-CCA's batch statistics) stay per micro-batch.
    grad_accum_steps: int = 1
    constraint_batch_size: int = 32  # pairs per worker per micro-batch
    corpus_batch_size: int = 16  # sentences per worker per step
    static_batch_size: int = 64  # (word, static vector) rows per worker per step
    checkpoint_every: int = 50
    # Worker failures (a killed process, a lost node) the run recovers from by itself, restarting the workers from
    # the last checkpoint at the same data position and random state
    max_failures: int = 3
    log_every: int = 10
    seed: int = 0
    gradient_checkpointing: bool = False  # recompute activations in the backward pass: less memory, more compute
    # DeepSpeed settings merged over distalign's own (offload, overlap_comm, bucket sizes, ...): a JSON or
    # YAML file, then this mapping on top
    deepspeed_config_file: str = ""
    deepspeed_config: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalConfig:
    every: int = 50  # steps between in-loop evaluations (0 = only at start and end)
    # > 0: evaluate (and checkpoint) every this many epochs of the training pairs instead (BabelBERT code: 0.05)
    every_epochs: float = 0.0
    bli_max_pairs: int = 500  # held-out pairs per language pair evaluated in the loop
    # in-loop BLI queries: one per source word ("grouped"), or one per pair with the word's other
    # translations competing ("per_pair", as BabelBERT evaluates)
    bli_ranking: Literal["grouped", "per_pair"] = "grouped"
    languages: list[str] = field(default_factory=list)  # in-loop BLI only on pairs of these languages (empty = all)
    # <lang>_vocab.txt files (one word a line, most frequent first): in-loop BLI ranks each pair's targets among
    # the top vocab_size words, as BabelBERT validates (100K); empty: among the pairs' own targets
    vocab_dir: str = ""
    vocab_size: int = 100_000


@dataclass
class TrackingConfig:
    # MLflow tracking URI; empty = $MLFLOW_TRACKING_URI, else sqlite:///<DISTALIGN_HOME or cwd>/mlflow.db
    uri: str = ""
    experiment: str = "distalign"
    parent_run_id: str = ""  # set by Tune: the study's parent run
    tags: dict[str, str] = field(default_factory=dict)  # set on the run (a study: what the trial stands for)
    # every node's CPU, memory, disk, network and GPU use, logged as system/node<k>/... (0: off)
    system_metrics_every_s: float = 10.0


@dataclass
class StorageConfig:
    # Local directory or URI (s3://bucket/prefix) for checkpoints; relative paths are under DISTALIGN_HOME.
    # Empty: $DISTALIGN_STORAGE (a cluster's runtime environment sets it), else "runs".
    path: str = ""
    # S3-compatible endpoint (MinIO, moto); empty: $DISTALIGN_STORAGE_ENDPOINT, else AWS's
    endpoint_url: str = ""
    keep_checkpoints: int = 2


@dataclass
class RunConfig:
    name: str = "quickstart"  # same name again = resume from the last checkpoint


@dataclass
class ExperimentConfig:
    run: RunConfig = field(default_factory=RunConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    objectives: ObjectivesConfig = field(default_factory=default_objectives)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["objectives"] = dict(data["objectives"])  # a plain dict, as YAML writers want
        return data

    def flat(self) -> dict[str, Any]:
        """Params flattened with dots (``train.lr``), as logged to MLflow."""
        return flatten(self.to_dict())

    @property
    def storage_is_remote(self) -> bool:
        return "://" in self.storage.path


# --------------------------------------------------------------------------------------------
# Building dataclasses from plain dicts, with errors that name the key


_FLOAT_RE = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")


def _coerce(value: Any, hint: Any, key: str) -> Any:
    origin = typing.get_origin(hint)
    if hint is Any:
        return value
    if hint is ObjectivesConfig:
        return objectives_from_dict(value, key)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {type(value).__name__} {value!r}")
        return from_dict(hint, value, key)
    if origin is Literal:
        allowed = typing.get_args(hint)
        if value not in allowed:
            raise ConfigError(f"{key}: {value!r} is not one of {list(allowed)}")
        return value
    if origin is list:
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {type(value).__name__} {value!r}")
        (item_hint,) = typing.get_args(hint)
        return [_coerce(v, item_hint, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is tuple:  # tuple[X, ...] or a fixed tuple[A, B]; a YAML list either way
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {type(value).__name__} {value!r}")
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            args = (args[0],) * len(value)
        elif len(value) != len(args):
            raise ConfigError(f"{key}: expected a list of {len(args)} items, got {value!r}")
        return tuple(_coerce(v, a, f"{key}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {type(value).__name__} {value!r}")
        key_hint, value_hint = typing.get_args(hint)
        return {_coerce(k, key_hint, key): _coerce(v, value_hint, f"{key}.{k}") for k, v in value.items()}
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if len(args) != 2 or type(None) not in args:
            raise ConfigError(f"{key}: only optional (X | None) unions are supported in configs")
        if value is None:
            return None
        return _coerce(value, next(a for a in args if a is not type(None)), key)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true/false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if hint is float:
        # PyYAML (YAML 1.1) reads 1e-4 (no dot) as a string; accept such numeric strings.
        if isinstance(value, str) and _FLOAT_RE.fullmatch(value.strip()):
            return float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported type {hint}")


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build dataclass ``cls`` from a nested dict, checking keys and types; errors name the dotted key.

    The keys are the constructor's arguments (fields with ``init=False`` are state, not configuration).
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    for key in data:
        if key not in names:
            where = f"{prefix}.{key}" if prefix else key
            raise ConfigError(f"unknown key '{where}' (allowed here: {', '.join(sorted(names))})")
    kwargs = {}
    for name, value in data.items():
        where = f"{prefix}.{name}" if prefix else name
        kwargs[name] = _coerce(value, hints[name], where)
    return cls(**kwargs)


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def apply_override(data: dict[str, Any], override: str, cls: type | None = None) -> None:
    """Apply ``a.b.c=value`` (value parsed as YAML) to a nested dict in place.

    With the dataclass ``cls`` the dict will build, the rest of the key after a mapping-typed field
    is one key of that mapping: ``grid.train.lr=[1e-3]`` sets ``grid["train.lr"]``.
    """
    if "=" not in override:
        raise ConfigError(f"override {override!r} is not of the form key.sub=value")
    key, raw = override.split("=", 1)
    parts = key.strip().split(".")
    hint: Any = cls
    for i, part in enumerate(parts):
        if typing.get_origin(hint) is dict:
            parts = parts[:i] + [".".join(parts[i:])]
            break
        if not dataclasses.is_dataclass(hint):
            break
        hint = typing.get_type_hints(hint).get(part)  # None for an unknown key: from_dict names it
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"override {key}: '{part}' is not a section")
    node[parts[-1]] = yaml.safe_load(raw)


# --------------------------------------------------------------------------------------------
# Loading and validation


def distalign_home() -> Path:
    """Base for relative outputs (mlflow.db, runs/): $DISTALIGN_HOME or the working directory."""
    return Path(os.environ.get("DISTALIGN_HOME") or os.getcwd()).resolve()


def resolve_tracking_uri(explicit: str = "") -> str:
    """The MLflow store: ``explicit``, else $MLFLOW_TRACKING_URI, else sqlite:///<distalign_home()>/mlflow.db."""
    return explicit or os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{distalign_home() / 'mlflow.db'}"


def read_mapping(path: str | os.PathLike) -> dict[str, Any]:
    """A YAML file whose top level is a mapping (an empty file is an empty mapping)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        loaded = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML: {err}") from err
    if loaded is not None and not isinstance(loaded, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return loaded or {}


def load_dataclass(cls: type, path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> Any:
    """Build dataclass ``cls`` from a YAML file and dotted ``key=value`` overrides (applied in order).

    The loader of every configuration file (experiment configs, Tune studies, evaluation specs):
    unknown keys and wrong types are errors that name the dotted key.
    """
    data = read_mapping(path) if path is not None else {}
    for override in overrides or []:
        apply_override(data, override, cls)
    return from_dict(cls, data)


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> ExperimentConfig:
    """The experiment config of a YAML file plus overrides, with absolute paths, completely validated."""
    config = load_dataclass(ExperimentConfig, path, overrides)
    resolve_paths(config, base=Path(path).parent if path is not None else Path.cwd())
    validate(config)
    return config


def resolve_path(p: str, base: Path) -> str:
    """An absolute local path (URIs and "" unchanged): relative to the working directory if it exists there,
    else to ``base`` (the config file's folder) if it exists there, else to the working directory."""
    if not p or "://" in p:
        return p
    q = Path(p).expanduser()
    if q.is_absolute():
        return str(q)
    for candidate in (Path.cwd() / q, base / q):
        if candidate.exists():
            return str(candidate.resolve())
    return str((Path.cwd() / q).resolve())


def resolve_paths(config: ExperimentConfig, base: Path) -> None:
    """Make every local path absolute so Ray workers (other working dirs) see the same files."""
    data = config.data
    data.constraints = [resolve_path(p, base) for p in data.constraints]
    for src in data.dictionaries + data.eval_dictionaries + data.corpora + data.static_vectors:
        src.path = resolve_path(src.path, base)
    for src in data.corpora:  # a local save_to_disk directory, not a hub dataset name
        if src.hf_dataset and Path(resolve_path(src.hf_dataset, base)).is_dir():
            src.hf_dataset = resolve_path(src.hf_dataset, base)
    if config.model.name_or_path != "tiny" and Path(config.model.name_or_path).expanduser().exists():
        config.model.name_or_path = str(Path(config.model.name_or_path).expanduser().resolve())
    config.storage.path = config.storage.path or os.environ.get("DISTALIGN_STORAGE") or "runs"
    config.storage.endpoint_url = config.storage.endpoint_url or os.environ.get("DISTALIGN_STORAGE_ENDPOINT", "")
    if not config.storage_is_remote:
        storage = Path(config.storage.path).expanduser()
        config.storage.path = str(storage if storage.is_absolute() else distalign_home() / storage)
    config.tracking.uri = resolve_tracking_uri(config.tracking.uri)
    config.train.deepspeed_config_file = resolve_path(config.train.deepspeed_config_file, base)
    config.eval.vocab_dir = resolve_path(config.eval.vocab_dir, base)
    if data.output_dir:
        data.output_dir = str(Path(data.output_dir).expanduser().resolve())
    elif config.storage_is_remote:
        data.output_dir = str(distalign_home() / "runs" / config.run.name / "data")
    else:
        data.output_dir = str(Path(config.storage.path) / config.run.name / "data")
    if data.cache_dir:
        data.cache_dir = str(Path(data.cache_dir).expanduser().resolve())
    else:  # remote storage: a driver-local cache (what a run needs is staged under its own name)
        data.cache_dir = str((distalign_home() if config.storage_is_remote else Path(config.storage.path)) / "cache")


def validate(config: ExperimentConfig) -> None:
    """Every check a run needs before Ray starts: values, data sources for the active objectives' streams,
    files that must exist, and each active objective's own checks; errors name the dotted key."""
    t, d, m, o = config.train, config.data, config.model, config.objectives
    require(bool(config.run.name) and "/" not in config.run.name, "run.name", "must be a non-empty name without '/'")
    require(t.num_workers >= 1, "train.num_workers", "must be >= 1")
    require(t.cpus_per_worker > 0, "train.cpus_per_worker", "must be > 0")
    require(0 <= t.zero_stage <= 3, "train.zero_stage", "must be 0, 1, 2 or 3")
    require(t.engine == "deepspeed" or t.zero_stage == 0, "train.zero_stage", "ZeRO needs train.engine=deepspeed")
    require(t.optimizer != "lamb" or t.zero_stage == 0, "train.optimizer",
            f"LAMB's trust ratio needs whole tensors, which ZeRO stage {t.zero_stage} splits into flat "
            "partitions: use train.zero_stage=0 or train.engine=ddp")
    require(t.engine == "deepspeed" or not (t.deepspeed_config or t.deepspeed_config_file), "train.deepspeed_config",
            "needs train.engine=deepspeed")
    require(not t.deepspeed_config_file or Path(t.deepspeed_config_file).is_file(), "train.deepspeed_config_file",
            f"file not found: {t.deepspeed_config_file!r}")
    require(t.lr > 0, "train.lr", "must be > 0")
    require(t.max_steps >= 1, "train.max_steps", "must be >= 1")
    require(t.grad_accum_steps >= 1, "train.grad_accum_steps", "must be >= 1")
    require(t.epochs >= 0, "train.epochs", "must be >= 0 (0 = train.max_steps)")
    require(t.checkpoint_every >= 1, "train.checkpoint_every", "must be >= 1")
    require(t.max_failures >= -1, "train.max_failures", "must be >= 0, or -1 for no limit")
    require(t.log_every >= 1, "train.log_every", "must be >= 1")
    require(t.constraint_batch_size >= 2, "train.constraint_batch_size", "must be >= 2")
    require(t.corpus_batch_size >= 1, "train.corpus_batch_size", "must be >= 1")
    require(config.eval.every >= 0, "eval.every", "must be >= 0")
    require(config.eval.every_epochs >= 0, "eval.every_epochs", "must be >= 0")
    require(config.eval.vocab_size >= 1, "eval.vocab_size", "must be >= 1")
    corpus_epochs = (t.epochs or config.eval.every_epochs) and "constraints" not in o.streams()
    require(not (d.pack_sequences and corpus_epochs), "data.pack_sequences",
            "an epoch of a corpus run counts sentences, not packed sequences: use train.max_steps and eval.every")
    require(not config.eval.vocab_dir or Path(config.eval.vocab_dir).is_dir(), "eval.vocab_dir",
            f"not a directory: {config.eval.vocab_dir}")
    require(m.adapters.reduction_factor >= 1, "model.adapters.reduction_factor", "must be >= 1")
    validate_objectives(config)
    require(d.sampling_alpha > 0, "data.sampling_alpha", "must be > 0")
    require(0 < d.corpus_sampling_alpha <= 1, "data.corpus_sampling_alpha", "must be in (0, 1]")
    require(d.tokenize_cpus > 0, "data.tokenize_cpus", "must be > 0")
    require(d.corpus_cpus_per_worker > 0, "data.corpus_cpus_per_worker", "must be > 0")
    require(d.max_constraints >= 0, "data.max_constraints", "must be >= 0 (0 = all)")
    require(d.constraints_per_pair >= 0, "data.constraints_per_pair", "must be >= 0 (0 = as they come)")
    require(0 < d.dictionary_fraction <= 1, "data.dictionary_fraction", "must be in (0, 1]")
    require(2 <= d.max_seq_length <= m.tiny.max_length or m.name_or_path != "tiny", "data.max_seq_length",
             f"must be in [2, model.tiny.max_length={m.tiny.max_length}]")
    require(m.max_word_tokens >= 3, "model.max_word_tokens", "must be >= 3 ([CLS] word [SEP])")
    if d.source == "synthetic":
        s = d.synthetic
        require(len(s.languages) >= 2 and len(set(s.languages)) == len(s.languages),
                 "data.synthetic.languages", "needs at least two distinct languages")
        require(s.num_concepts >= 10, "data.synthetic.num_concepts", "must be >= 10")
        require(0 < s.heldout_fraction < 1, "data.synthetic.heldout_fraction", "must be in (0, 1)")
        require(0 <= s.synonym_rate <= 1, "data.synthetic.synonym_rate", "must be in [0, 1]")
    else:
        readers = {name for name, (plugin, _) in o.active().items()
                   if plugin.stream == "constraints" or plugin.uses_word_pairs}
        require(bool(d.constraints or d.dictionaries) or not readers, "data.constraints",
                 f"objectives {sorted(readers)} need data.constraints or data.dictionaries")
        corpus = sorted(name for name, (plugin, _) in o.active().items() if plugin.stream == "corpus")
        require(bool(d.corpora) or not corpus, "data.corpora", f"objectives {corpus} need data.corpora")
    for i, p in enumerate(d.constraints):
        require(Path(p).is_file(), f"data.constraints[{i}]", f"file not found: {p}")
    for key, sources in (("data.dictionaries", d.dictionaries), ("data.eval_dictionaries", d.eval_dictionaries)):
        for i, src in enumerate(sources):
            require(Path(src.path).is_file(), f"{key}[{i}].path", f"file not found: {src.path!r}")
            require(bool(src.lang1 and src.lang2), f"{key}[{i}]", "needs lang1 and lang2")
    for i, src in enumerate(d.static_vectors):
        require(Path(src.path).is_file(), f"data.static_vectors[{i}].path", f"file not found: {src.path!r}")
        require(bool(src.lang), f"data.static_vectors[{i}].lang", "is required")
    for i, src in enumerate(d.corpora):
        validate_corpus_source(src, f"data.corpora[{i}]")
    require(d.shuffle_buffer_rows >= 0, "data.shuffle_buffer_rows", "must be >= 0 (0 = off)")
    if m.name_or_path != "tiny" and not _looks_like_hub_name(m.name_or_path):
        require(Path(m.name_or_path).is_dir(), "model.name_or_path", f"no such model directory: {m.name_or_path}")


def validate_corpus_source(src: CorpusSource, key: str) -> None:
    """Local files must exist here; ``s3://`` sources and datasets are listed when the run prepares its data."""
    require(bool(src.lang), f"{key}.lang", "is required")
    require(bool(src.path) != bool(src.hf_dataset), key, "needs exactly one of path and hf_dataset")
    if not src.path or "://" in src.path:
        return
    if any(c in src.path for c in "*?["):
        require(bool(glob.glob(src.path)), f"{key}.path", f"no file matches {src.path!r}")
        return
    require(Path(src.path).exists(), f"{key}.path", f"file not found: {src.path!r}")
    require(Path(src.path).is_dir() or Path(src.path).suffix in (".txt", ".jsonl", ".parquet"), f"{key}.path",
            "must end in .txt, .jsonl or .parquet (or be a directory of such files)")


def validate_objectives(config: ExperimentConfig) -> None:
    """Weights, each active plugin's own checks, and at most one data-side preparer per stream."""
    o = config.objectives
    for name, section in o.items():
        require(section.weight >= 0, f"objectives.{name}.weight", "must be >= 0")
    require(bool(o.active()), "objectives", "every objective has weight 0: nothing to train")
    preparers: dict[str, str] = {}
    for name, (plugin, section) in o.active().items():
        plugin.validate(section, config, f"objectives.{name}")
        if plugin.prepares:  # two objectives cannot both transform (e.g. mask) the same batches
            other = preparers.setdefault(plugin.stream, name)
            require(other == name, f"objectives.{name}.weight",
                     f"objectives.{other} and objectives.{name} both prepare (mask) the '{plugin.stream}' batches: "
                     f"use one of them (set the other's weight to 0)")


def _looks_like_hub_name(name: str) -> bool:
    # "xlm-roberta-base", "org/model"; a path that exists locally is handled as a directory.
    return not Path(name).expanduser().exists() and not name.startswith(("/", ".", "~")) and name.count("/") <= 1
