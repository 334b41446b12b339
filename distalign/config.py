"""The experiment configuration: typed dataclasses, YAML in, dotted ``key=value`` overrides.

Everything a run needs is in one ``ExperimentConfig``. ``load_config`` validates it completely
(unknown keys, wrong types, missing files, impossible values) before any Ray resources are taken,
and every error names the dotted key that is wrong.
"""

from __future__ import annotations

import dataclasses
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml


class ConfigError(ValueError):
    """A configuration problem; the message names the offending key or file."""


# --------------------------------------------------------------------------------------------
# Sections


@dataclass
class TinyModelConfig:
    """A random-init XLM-R-style encoder built offline (tokenizer trained on the run's text)."""

    vocab_size: int = 2000  # target size of the trained Unigram tokenizer
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    intermediate_size: int = 128
    max_length: int = 64  # max positions / tokens per sequence


@dataclass
class AdaptersConfig:
    # Bottleneck adapters in every layer (BabelBERT's adapter variant); only adapters are trained.
    enabled: bool = False
    reduction_factor: int = 16  # adapter width = hidden size / reduction_factor
    non_linearity: str = "relu"


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
class SyntheticConfig:
    """A small synthetic multilingual world: shared concepts, related vocabularies, own word orders."""

    languages: list[str] = field(default_factory=lambda: ["xa", "xb", "xc"])
    num_concepts: int = 300
    sentences_per_language: int = 1500
    synonym_rate: float = 0.2  # share of concepts with a second word (monolingual synonyms)
    heldout_fraction: float = 0.2  # concepts held out of the constraints for BLI evaluation


@dataclass
class DictionarySource:
    """A bilingual dictionary (G-BLI / MUSE: ``src<TAB>tgt`` per line) between two languages."""

    path: str = ""
    lang1: str = ""
    lang2: str = ""


@dataclass
class CorpusSource:
    path: str = ""  # .txt (one sentence a line), .jsonl ({"text": ...}) or .parquet (column text)
    lang: str = ""


@dataclass
class StaticVectorsSource:
    path: str = ""  # word2vec text format (e.g. from `distalign static extract` / `static align`)
    lang: str = ""


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
    max_constraints: int = 0  # constraint-set size after language-pair sampling (0 = all)
    sampling_alpha: float = 0.5  # q ∝ p^alpha over language pairs (BabelBERT)
    dictionary_fraction: float = 1.0  # share of the (sampled) pairs used in training (ALIGN-MLM's dictionary size)
    max_seq_length: int = 64
    # CPUs per Ray Data tokenisation task: fractional so a small machine running Train workers
    # (and a Tune trial) still has room for data tasks, which otherwise wait forever.
    tokenize_cpus: float = 0.25
    output_dir: str = ""  # where generated data goes (default: <storage.path>/<run.name>/data)


@dataclass
class MLMConfig:
    weight: float = 1.0  # 0 disables the objective
    mask_prob: float = 0.15  # share of words masked (whole-word masking)


@dataclass
class LexicalConfig:
    weight: float = 1.0
    temperature: float = 0.07
    # sense level: each word encoded with its synset gloss ([CLS] word [SEP] gloss [SEP]), only the
    # word's subwords pooled; pairs without glosses fall back to the word alone
    sense_level: bool = False
    gloss_weight: float = 0.0  # > 0 adds the same InfoNCE on the gloss spans (sense level only)
    max_sense_tokens: int = 64  # subword budget of word + gloss


@dataclass
class AlignConfig:
    # ALIGN-MLM (Tang et al. 2022): weight = alpha (10 in the paper) on -mean cos of the input
    # embeddings of dictionary pairs (data.constraints / data.dictionaries; see data.dictionary_fraction)
    weight: float = 0.0


@dataclass
class DictMLMConfig:
    # DICT-MLM (Chaudhary et al. 2020): replaces objectives.mlm (both mask the corpus batch)
    weight: float = 0.0
    mask_prob: float = 0.15  # share of dictionary words masked (whole words)
    keep_original: float = 0.5  # the paper's x/100: a masked word keeps its own label this often (0.5/0.7/0.9)
    tlm: bool = False  # dict-TLM: [CLS] sentence [SEP] code-switched copy [SEP], masked together
    switch_prob: float = 0.5  # dict-TLM: share of dictionary words switched in the copy


@dataclass
class StaticAlignConfig:
    # Hämmerl et al. 2022: a word's contextual vector (encoded alone, model.word_layer) pulled to its
    # static vector from data.static_vectors; the static side is fixed, only the encoder learns
    weight: float = 0.0
    loss: Literal["mse", "dcca"] = "mse"  # mse needs static dim == hidden size
    dcca_k: int = 10  # top-k canonical correlations (needs train.static_batch_size > k)
    # Without data.static_vectors the targets are derived from the starting model before training:
    # X2Static vectors per corpus language, Procrustes-mapped onto the first language by the training pairs
    extract_layer: int = 6  # X2Static teacher layer (6 for XLM-R base; 0 = embeddings, -1 = last)
    extract_epochs: int = 1
    align_iterations: int = 1  # self-learning rounds after the seed-dictionary fit (0 = seed only)


@dataclass
class SenseAwareConfig:
    # multi-sense MLM + sense-level translation loss; replaces objectives.mlm. Only proj_dim = 14 (BERT)
    # is the paper's; the other defaults are ours. Translations: single-token training pairs.
    weight: float = 0.0
    num_senses: int = 3  # S sense output vectors per vocabulary entry
    proj_dim: int = 14  # d': PCA projection of the states the senses are chosen in
    queue_size: int = 4096  # Q recent states the projection is fitted on
    refit_every: int = 1000  # M steps between projection refits (and pruning)
    alpha: float = 0.01  # sense learning rate of the centre update c <- (1-alpha) c + alpha h
    warmup_steps: int = 1000  # W steps with a single sense
    prune_beta: float = 0.0  # prune senses chosen less than this share of a token's selections (0 = never)
    prune_min_count: int = 100  # only tokens selected at least this often are pruned
    translation_weight: float = 0.5  # share of the translation label's loss where one exists (0.5 = mean)
    max_translations: int = 8


# Which data stream each objective reads (the loop draws one batch per stream per step).
OBJECTIVE_STREAMS = {"mlm": "corpus", "lexical": "constraints", "align": "constraints", "dict_mlm": "corpus",
                     "static": "static", "sense_aware": "corpus"}


@dataclass
class ObjectivesConfig:
    mlm: MLMConfig = field(default_factory=MLMConfig)
    lexical: LexicalConfig = field(default_factory=LexicalConfig)
    align: AlignConfig = field(default_factory=AlignConfig)
    dict_mlm: DictMLMConfig = field(default_factory=DictMLMConfig)
    static: StaticAlignConfig = field(default_factory=StaticAlignConfig)
    sense_aware: SenseAwareConfig = field(default_factory=SenseAwareConfig)

    def active(self) -> dict[str, float]:
        return {name: section.weight for name, section in self._sections().items() if section.weight > 0}

    def streams(self) -> set[str]:
        return {OBJECTIVE_STREAMS[name] for name in self.active()}

    @property
    def uses_dictionary(self) -> bool:
        """Objectives that read the training pairs as a dictionary inside the workers."""
        return self.dict_mlm.weight > 0 or self.sense_aware.weight > 0

    def _sections(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclass
class TrainConfig:
    num_workers: int = 2
    cpus_per_worker: float = 0.5  # fractional on small machines so Ray Data keeps CPUs
    use_gpu: bool = False
    engine: Literal["ddp", "deepspeed"] = "ddp"
    zero_stage: int = 0  # DeepSpeed ZeRO stage 0-3
    precision: Literal["fp32", "bf16"] = "fp32"
    lr: float = 5e-4
    weight_decay: float = 0.01
    warmup_steps: int = 10
    max_steps: int = 200
    epochs: float = 0.0  # > 0: train this many epochs of the main stream instead (sets max_steps from the data)
    constraint_batch_size: int = 32  # pairs per worker per step
    corpus_batch_size: int = 16  # sentences per worker per step
    static_batch_size: int = 64  # (word, static vector) rows per worker per step
    checkpoint_every: int = 50
    log_every: int = 10
    seed: int = 0


@dataclass
class EvalConfig:
    every: int = 50  # steps between in-loop evaluations (0 = only at start and end)
    # > 0: evaluate (and checkpoint) every this many epochs of the training pairs instead (BabelBERT code: 0.05)
    every_epochs: float = 0.0
    bli_max_pairs: int = 500  # held-out pairs per language pair evaluated in the loop


@dataclass
class TrackingConfig:
    # MLflow tracking URI; empty = $MLFLOW_TRACKING_URI, else sqlite:///<DISTALIGN_HOME or cwd>/mlflow.db
    uri: str = ""
    experiment: str = "distalign"
    parent_run_id: str = ""  # set by Tune: the study's parent run


@dataclass
class StorageConfig:
    # Local directory or URI (s3://bucket/prefix) for checkpoints; relative paths are under DISTALIGN_HOME.
    path: str = "runs"
    endpoint_url: str = ""  # S3-compatible endpoint (MinIO, moto); empty = AWS default
    keep_checkpoints: int = 2


@dataclass
class RunConfig:
    name: str = "quickstart"  # same name again = resume from the last checkpoint


@dataclass
class ExperimentConfig:
    run: RunConfig = field(default_factory=RunConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    objectives: ObjectivesConfig = field(default_factory=ObjectivesConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

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
    if origin in (typing.Union, types.UnionType):
        raise ConfigError(f"{key}: union types are not supported in configs")
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
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
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


def apply_override(data: dict[str, Any], override: str) -> None:
    """Apply ``a.b.c=value`` (value parsed as YAML) to a nested dict in place."""
    if "=" not in override:
        raise ConfigError(f"override {override!r} is not of the form key.sub=value")
    key, raw = override.split("=", 1)
    parts = key.strip().split(".")
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


def load_config(path: str | os.PathLike | None = None, overrides: list[str] | None = None) -> ExperimentConfig:
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        try:
            loaded = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML: {err}") from err
        if loaded is not None and not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping")
        data = loaded or {}
    for override in overrides or []:
        apply_override(data, override)
    config = from_dict(ExperimentConfig, data)
    resolve_paths(config, base=Path(path).parent if path is not None else Path.cwd())
    validate(config)
    return config


def _resolve(p: str, base: Path) -> str:
    if not p or "://" in p:
        return p
    q = Path(p).expanduser()
    if q.is_absolute():
        return str(q)
    # Data paths are relative to the working directory first, then to the config file.
    for candidate in (Path.cwd() / q, base / q):
        if candidate.exists():
            return str(candidate.resolve())
    return str((Path.cwd() / q).resolve())


def resolve_paths(config: ExperimentConfig, base: Path) -> None:
    """Make every local path absolute so Ray workers (other working dirs) see the same files."""
    data = config.data
    data.constraints = [_resolve(p, base) for p in data.constraints]
    for src in data.dictionaries + data.eval_dictionaries + data.corpora + data.static_vectors:
        src.path = _resolve(src.path, base)
    if config.model.name_or_path != "tiny" and Path(config.model.name_or_path).expanduser().exists():
        config.model.name_or_path = str(Path(config.model.name_or_path).expanduser().resolve())
    if not config.storage_is_remote:
        storage = Path(config.storage.path).expanduser()
        config.storage.path = str(storage if storage.is_absolute() else distalign_home() / storage)
    if not config.tracking.uri:
        config.tracking.uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{distalign_home() / 'mlflow.db'}"
    if data.output_dir:
        data.output_dir = str(Path(data.output_dir).expanduser().resolve())
    elif config.storage_is_remote:
        data.output_dir = str(distalign_home() / "runs" / config.run.name / "data")
    else:
        data.output_dir = str(Path(config.storage.path) / config.run.name / "data")


def _require(cond: bool, key: str, message: str) -> None:
    if not cond:
        raise ConfigError(f"{key}: {message}")


def validate(config: ExperimentConfig) -> None:
    t, d, m, o = config.train, config.data, config.model, config.objectives
    _require(bool(config.run.name) and "/" not in config.run.name, "run.name", "must be a non-empty name without '/'")
    _require(t.num_workers >= 1, "train.num_workers", "must be >= 1")
    _require(t.cpus_per_worker > 0, "train.cpus_per_worker", "must be > 0")
    _require(0 <= t.zero_stage <= 3, "train.zero_stage", "must be 0, 1, 2 or 3")
    _require(t.engine == "deepspeed" or t.zero_stage == 0, "train.zero_stage", "ZeRO needs train.engine=deepspeed")
    _require(t.lr > 0, "train.lr", "must be > 0")
    _require(t.max_steps >= 1, "train.max_steps", "must be >= 1")
    _require(t.epochs >= 0, "train.epochs", "must be >= 0 (0 = train.max_steps)")
    _require(t.checkpoint_every >= 1, "train.checkpoint_every", "must be >= 1")
    _require(t.log_every >= 1, "train.log_every", "must be >= 1")
    _require(t.constraint_batch_size >= 2, "train.constraint_batch_size", "must be >= 2")
    _require(t.corpus_batch_size >= 1, "train.corpus_batch_size", "must be >= 1")
    _require(config.eval.every >= 0, "eval.every", "must be >= 0")
    _require(config.eval.every_epochs >= 0, "eval.every_epochs", "must be >= 0")
    _require(0 < o.mlm.mask_prob < 1, "objectives.mlm.mask_prob", "must be in (0, 1)")
    _require(o.lexical.temperature > 0, "objectives.lexical.temperature", "must be > 0")
    _require(o.lexical.gloss_weight >= 0, "objectives.lexical.gloss_weight", "must be >= 0")
    _require(o.mlm.weight == 0 or o.dict_mlm.weight == 0, "objectives.dict_mlm.weight",
             "DICT-MLM replaces MLM: set objectives.mlm.weight=0")
    _require(sum(w > 0 for w in (o.mlm.weight, o.dict_mlm.weight, o.sense_aware.weight)) <= 1,
             "objectives.sense_aware.weight", "mlm, dict_mlm and sense_aware each predict the masked corpus "
             "tokens: use one of them")
    sa = o.sense_aware
    _require(sa.num_senses >= 1, "objectives.sense_aware.num_senses", "must be >= 1")
    _require(sa.queue_size > sa.proj_dim >= 1, "objectives.sense_aware.queue_size", "must exceed proj_dim >= 1")
    _require(0 < sa.alpha <= 1, "objectives.sense_aware.alpha", "must be in (0, 1]")
    _require(0 <= sa.prune_beta <= 1, "objectives.sense_aware.prune_beta", "must be in [0, 1]")
    _require(0 <= sa.translation_weight <= 1, "objectives.sense_aware.translation_weight", "must be in [0, 1]")
    _require(0 < o.dict_mlm.mask_prob < 1, "objectives.dict_mlm.mask_prob", "must be in (0, 1)")
    _require(0 <= o.dict_mlm.keep_original <= 1, "objectives.dict_mlm.keep_original", "must be in [0, 1]")
    _require(0 <= o.dict_mlm.switch_prob <= 1, "objectives.dict_mlm.switch_prob", "must be in [0, 1]")
    _require(o.lexical.gloss_weight == 0 or o.lexical.sense_level, "objectives.lexical.gloss_weight",
             "needs objectives.lexical.sense_level: true")
    _require(o.lexical.max_sense_tokens >= 6, "objectives.lexical.max_sense_tokens", "must be >= 6")
    _require(m.adapters.reduction_factor >= 1, "model.adapters.reduction_factor", "must be >= 1")
    for name, section in o._sections().items():
        _require(section.weight >= 0, f"objectives.{name}.weight", "must be >= 0")
    _require(bool(o.active()), "objectives", "every objective has weight 0: nothing to train")
    _require(d.sampling_alpha > 0, "data.sampling_alpha", "must be > 0")
    _require(d.tokenize_cpus > 0, "data.tokenize_cpus", "must be > 0")
    _require(d.max_constraints >= 0, "data.max_constraints", "must be >= 0 (0 = all)")
    _require(0 < d.dictionary_fraction <= 1, "data.dictionary_fraction", "must be in (0, 1]")
    _require(2 <= d.max_seq_length <= m.tiny.max_length or m.name_or_path != "tiny", "data.max_seq_length",
             f"must be in [2, model.tiny.max_length={m.tiny.max_length}]")
    _require(m.max_word_tokens >= 3, "model.max_word_tokens", "must be >= 3 ([CLS] word [SEP])")
    if d.source == "synthetic":
        s = d.synthetic
        _require(len(s.languages) >= 2 and len(set(s.languages)) == len(s.languages),
                 "data.synthetic.languages", "needs at least two distinct languages")
        _require(s.num_concepts >= 10, "data.synthetic.num_concepts", "must be >= 10")
        _require(0 < s.heldout_fraction < 1, "data.synthetic.heldout_fraction", "must be in (0, 1)")
        _require(0 <= s.synonym_rate <= 1, "data.synthetic.synonym_rate", "must be in [0, 1]")
    else:
        _require(bool(d.constraints or d.dictionaries) or ("constraints" not in o.streams() and not o.uses_dictionary),
                 "data.constraints", "the lexical, align, dict_mlm and sense_aware objectives need data.constraints "
                 "or data.dictionaries")
        _require(bool(d.corpora) or "corpus" not in o.streams(), "data.corpora", "the MLM objective needs data.corpora")
    for i, p in enumerate(d.constraints):
        _require(Path(p).is_file(), f"data.constraints[{i}]", f"file not found: {p}")
    for key, sources in (("data.dictionaries", d.dictionaries), ("data.eval_dictionaries", d.eval_dictionaries)):
        for i, src in enumerate(sources):
            _require(Path(src.path).is_file(), f"{key}[{i}].path", f"file not found: {src.path!r}")
            _require(bool(src.lang1 and src.lang2), f"{key}[{i}]", "needs lang1 and lang2")
    for key, sources in (("data.corpora", d.corpora), ("data.static_vectors", d.static_vectors)):
        for i, src in enumerate(sources):
            _require(Path(src.path).is_file(), f"{key}[{i}].path", f"file not found: {src.path!r}")
            _require(bool(src.lang), f"{key}[{i}].lang", "is required")
    for i, src in enumerate(d.corpora):
        _require(Path(src.path).suffix in (".txt", ".jsonl", ".parquet"), f"data.corpora[{i}].path",
                 "must end in .txt, .jsonl or .parquet")
    _require(o.static.extract_epochs >= 1, "objectives.static.extract_epochs", "must be >= 1")
    _require(o.static.align_iterations >= 0, "objectives.static.align_iterations", "must be >= 0")
    derives_static = o.static.weight > 0 and not d.static_vectors and m.name_or_path == "tiny"
    _require(not derives_static or -(m.tiny.num_layers + 1) <= o.static.extract_layer <= m.tiny.num_layers,
             "objectives.static.extract_layer", f"must be in [{-(m.tiny.num_layers + 1)}, {m.tiny.num_layers}] "
             f"for the tiny model (model.tiny.num_layers={m.tiny.num_layers})")
    _require(o.static.loss == "mse" or t.static_batch_size > o.static.dcca_k, "train.static_batch_size",
             "must exceed objectives.static.dcca_k for Deep CCA")
    if m.name_or_path != "tiny" and not _looks_like_hub_name(m.name_or_path):
        _require(Path(m.name_or_path).is_dir(), "model.name_or_path", f"no such model directory: {m.name_or_path}")


def _looks_like_hub_name(name: str) -> bool:
    # "xlm-roberta-base", "org/model"; a path that exists locally is handled as a directory.
    return not Path(name).expanduser().exists() and not name.startswith(("/", ".", "~")) and name.count("/") <= 1
