"""The experiment schema: one ``ExperimentConfig`` of typed sections, and the checks a run needs
before any Ray resources are taken (every error names the dotted key that is wrong)."""

from __future__ import annotations

import dataclasses
import glob
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from distalign.config.loader import coerce, flatten
from distalign.data.run_facts import RunFacts
from distalign.data.sources import CorpusSource, DictionarySource, ParallelSource, StaticVectorsSource
from distalign.data.synthetic import SyntheticConfig
from distalign.errors import ConfigError, Problems, require
from distalign.languages import LanguageCode
from distalign.models.loading import TinyModelConfig, check_local_model

if TYPE_CHECKING:
    from distalign.objectives.base import Objective


@dataclass
class AdaptersConfig:
    # Bottleneck adapters in every layer (BabelBERT's adapter variant); only adapters are trained.
    enabled: bool = False
    reduction_factor: int = 16  # adapter width = hidden size / reduction_factor
    non_linearity: str = "relu"  # the adapter's activation: a name of transformers' ACT2FN (relu, gelu, ...)
    # pfeiffer: after the FFN sublayer's Add & Norm (BabelBERT's PfeifferConfig); houlsby: before it
    placement: Literal["pfeiffer", "houlsby"] = "pfeiffer"
    # bert: N(0, 0.02) weights in both projections (adapter-transformers' default, BabelBERT's); identity: a
    # zero up-projection, so the adapted model starts as the base model
    init: Literal["bert", "identity"] = "bert"

    def check(self) -> None:
        require(self.reduction_factor >= 1, "model.adapters.reduction_factor", "must be >= 1")


@dataclass
class ModelConfig:
    # Hub name (bert-base-multilingual-uncased, xlm-roberta-base), local HF directory, or "tiny".
    name_or_path: str = "tiny"
    tiny: TinyModelConfig = field(default_factory=TinyModelConfig)
    # Layer whose subword states are mean-pooled into word vectors (-1 = last, 0 = embeddings).
    word_layer: int = -1
    max_word_tokens: int = 16  # subword budget of a word encoded alone ([CLS] word [SEP])
    adapters: AdaptersConfig = field(default_factory=AdaptersConfig)

    def check(self) -> None:
        self.adapters.check()
        require(self.max_word_tokens >= 3, "model.max_word_tokens", "must be >= 3 ([CLS] word [SEP])")
        if self.name_or_path != "tiny":
            check_local_model(self.name_or_path, "model.name_or_path")


@dataclass(kw_only=True)
class DataConfig:
    # "synthetic" generates the whole world; "files" reads the sources below.
    source: Literal["synthetic", "files"] = "synthetic"
    synthetic: SyntheticConfig = field(default_factory=SyntheticConfig)
    # Constraint files: parquet in the constraint schema, or a BabelNet export (.tsv).
    constraints: list[str] = field(default_factory=list)
    dictionaries: list[DictionarySource] = field(default_factory=list)  # training dictionaries
    eval_dictionaries: list[DictionarySource] = field(default_factory=list)  # held-out BLI pairs
    corpora: list[CorpusSource] = field(default_factory=list)  # training sentences (MLM and the objectives on them)
    # held-out sentences (same format as corpora) scored by the MLM head at each in-loop evaluation:
    # eval/mlm/loss, and the model-selection score with eval.select_by: mlm_loss
    validation_corpora: list[CorpusSource] = field(default_factory=list)
    static_vectors: list[StaticVectorsSource] = field(default_factory=list)  # targets of objectives.static
    # translated sentence pairs read by objectives.tlm (with either source: the synthetic world has no twins)
    parallel: list[ParallelSource] = field(default_factory=list)
    max_constraints: int = 0  # constraint-set size: a subset keeping the full set's language-pair shares (0 = all)
    # a language sample (BabelBERT §5.1): only constraints between these languages (empty = all) ...
    constraint_languages: list[LanguageCode] = field(default_factory=list)
    constraints_per_pair: int = 0  # ... and exactly this many per language pair (0 = as they come)
    sampling_alpha: float = 0.5  # batches draw language pair k with q ∝ p^alpha (BabelBERT)
    # Corpus sentences of language l make up q_l ∝ p_l^alpha of an epoch (p_l: share of the corpus bytes; mBERT
    # and XLM-R smooth with 0.7 and 0.3) by keeping a seeded share of the larger languages' sentences; 1 = as is
    corpus_sampling_alpha: float = 1.0
    dictionary_fraction: float = 1.0  # share of the (sampled) pairs used in training (ALIGN-MLM's dictionary size)
    max_seq_length: int = 64  # tokens per corpus sequence, special tokens included (longer ones are cut)
    # Corpus sequences: consecutive sentences of one language packed up to max_seq_length tokens (BERT's and
    # ALIGN-MLM's pre-training instances; never across languages or files), else one sentence a sequence, padded,
    # which leaves most positions padding (perf/padding_share) and a GPU waiting for tokens. false where a sentence
    # must stay alone: dict-TLM (objectives.dict_mlm.tlm), train.epochs / eval.every_epochs counted on the corpus
    pack_sequences: bool = True
    # The corpus is cut into units of at most this many bytes (a parquet row group is one unit), dealt to the workers
    # each epoch: each unit read by one worker; the workers' bytes differ by at most one unit
    corpus_unit_bytes: int = 2**20
    corpus_mix_units: int = 4  # units a worker reads at once and whose sequences it shuffles together
    # CPUs per Ray task reading a batch of a table stream (constraints, static, parallel): fractional so a small
    # machine running Train workers (and a Tune trial) still has room for data tasks, which otherwise wait forever.
    tokenize_cpus: float = 0.25
    # CPUs each worker reserves (a placement group) for its corpus stream's item tasks, one task per CPU (at least 2).
    # A GPU at XLM-R base consumes what ~1 core tokenises and packs (~3 at 40 % MFU): set 3-4 on GPU nodes
    corpus_cpus_per_worker: float = 0.25
    output_dir: str = ""  # where generated data goes (default: <storage.path>/<run.name>/data)
    # synthetic worlds and tiny models shared between runs and trials, one per content hash
    # (default: <storage.path>/cache with local storage, else <DISTALIGN_HOME>/cache on the driver)
    cache_dir: str = ""

    def check(self) -> None:
        """Its values, and the local files it names (after ``environment.resolve_paths``)."""
        require(self.sampling_alpha > 0, "data.sampling_alpha", "must be > 0")
        require(0 < self.corpus_sampling_alpha <= 1, "data.corpus_sampling_alpha", "must be in (0, 1]")
        require(self.tokenize_cpus > 0, "data.tokenize_cpus", "must be > 0")
        require(self.corpus_cpus_per_worker > 0, "data.corpus_cpus_per_worker", "must be > 0")
        require(self.max_constraints >= 0, "data.max_constraints", "must be >= 0 (0 = all)")
        require(self.constraints_per_pair >= 0, "data.constraints_per_pair", "must be >= 0 (0 = as they come)")
        require(0 < self.dictionary_fraction <= 1, "data.dictionary_fraction", "must be in (0, 1]")
        require(self.corpus_unit_bytes >= 1, "data.corpus_unit_bytes", "must be >= 1")
        require(self.corpus_mix_units >= 1, "data.corpus_mix_units", "must be >= 1")
        if self.source == "synthetic":
            s = self.synthetic
            require(
                len(s.languages) >= 2 and len(set(s.languages)) == len(s.languages),
                "data.synthetic.languages",
                "needs at least two distinct languages",
            )
            require(s.num_concepts >= 10, "data.synthetic.num_concepts", "must be >= 10")
            require(0 < s.heldout_fraction < 1, "data.synthetic.heldout_fraction", "must be in (0, 1)")
            require(0 <= s.synonym_rate <= 1, "data.synthetic.synonym_rate", "must be in [0, 1]")
            require(s.validation_sentences >= 0, "data.synthetic.validation_sentences", "must be >= 0")
            require(s.transfer_examples >= 0, "data.synthetic.transfer_examples", "must be >= 0")
        problems = Problems()  # every missing or wrong source of the lists below at once
        for i, p in enumerate(self.constraints):
            with problems.check():
                require(Path(p).is_file(), f"data.constraints[{i}]", f"file not found: {p}")
        dictionaries = (("data.dictionaries", self.dictionaries), ("data.eval_dictionaries", self.eval_dictionaries))
        for key, sources in dictionaries:
            for i, src in enumerate(sources):
                with problems.check():
                    require(Path(src.path).is_file(), f"{key}[{i}].path", f"file not found: {src.path!r}")
                    require(bool(src.lang1 and src.lang2), f"{key}[{i}]", "needs lang1 and lang2")
        for i, src in enumerate(self.static_vectors):
            with problems.check():
                require(Path(src.path).is_file(), f"data.static_vectors[{i}].path", f"file not found: {src.path!r}")
                require(bool(src.lang), f"data.static_vectors[{i}].lang", "is required")
        for i, src in enumerate(self.corpora):
            with problems.check():
                validate_corpus_source(src, f"data.corpora[{i}]")
        for i, src in enumerate(self.parallel):
            with problems.check():
                validate_parallel_source(src, f"data.parallel[{i}]")
        for i, src in enumerate(self.validation_corpora):
            with problems.check():
                validate_corpus_source(src, f"data.validation_corpora[{i}]")
        problems.raise_any()


class ObjectivesConfig(dict):
    """``objectives.<name>`` sections by name, each the ``Config`` dataclass of its plugin.

    Every plugin of ``distalign.objectives.registry.OBJECTIVES`` has a section (defaults where the
    YAML names none); ``plugins`` keeps the plugin classes so workers need no registry lookup.
    """

    def __init__(self, sections: dict[str, Any] | None = None, plugins: dict[str, type[Objective]] | None = None):
        super().__init__(sections or {})
        self.plugins = dict(plugins or {})

    @classmethod
    def from_config_value(cls, value: Any, key: str) -> ObjectivesConfig:
        return objectives_from_dict(value, key)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no objective section '{name}'") from None

    def active(self) -> dict[str, tuple[type[Objective], Any]]:
        """name -> (plugin, section) of every objective with weight > 0."""
        return {name: (self.plugins[name], section) for name, section in self.items() if section.weight > 0}

    def weights(self) -> dict[str, float]:
        """name -> weight of every active objective."""
        return {name: section.weight for name, (_, section) in self.active().items()}

    def streams(self) -> set[str]:
        return {plugin.stream for plugin, _ in self.active().values()}

    def readers(self) -> dict[str, list[str]]:
        """stream -> the active objectives reading it."""
        out: dict[str, list[str]] = {}
        for name, (plugin, _) in self.active().items():
            out.setdefault(plugin.stream, []).append(name)
        return out

    @property
    def uses_word_pairs(self) -> bool:
        """Whether an active objective reads the run's training word pairs (in its worker or preparer)."""
        return any(plugin.uses_word_pairs for plugin, _ in self.active().values())


def _registered_objectives() -> dict[str, type[Objective]]:
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
        objectives[name] = coerce(section, objectives.plugins[name].Config, f"{key}.{name}")
    return objectives


@dataclass(kw_only=True)
class TrainConfig:
    num_workers: int = 2  # Ray Train workers (data-parallel ranks; one GPU each with use_gpu)
    # > 0: the run may go on with fewer workers, down to this many, when the cluster shrinks (a lost node): Ray
    # Train restarts the workers that fit from the last checkpoint, and the corpus epoch is dealt among them
    min_workers: int = 0
    cpus_per_worker: float = 0.5  # fractional on small machines so Ray Data keeps CPUs
    # Ray placement of the workers: PACK (fill nodes), SPREAD, STRICT_PACK, STRICT_SPREAD (one per node)
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    use_gpu: bool = False  # one GPU per worker (NCCL); false trains on CPUs (gloo)
    engine: Literal["ddp", "deepspeed"] = "ddp"  # PyTorch DDP, or DeepSpeed (ZeRO: zero_stage)
    zero_stage: int = 0  # DeepSpeed ZeRO stage 0-3
    precision: Literal["fp32", "bf16"] = "fp32"  # bf16: mixed precision (autocast with DDP, DeepSpeed's bf16)
    # adamw, or lamb (You et al. 2020; DICT-MLM §3.1): a per-tensor trust ratio, for batches of thousands
    optimizer: Literal["adamw", "lamb"] = "adamw"
    lr: float = 5e-4  # peak learning rate, reached after warmup_steps
    weight_decay: float = 0.01  # the optimizer's weight decay
    warmup_steps: int = 10  # steps of linear warm-up from 0 to lr
    lr_schedule: Literal["linear", "constant"] = "linear"  # after warm-up: linear decay to 0, or constant
    max_steps: int = 200  # optimizer steps of the run (unless epochs > 0)
    # > 0: train this many epochs of the main stream instead (the run's schedule takes its steps from the data)
    epochs: float = 0.0
    # Micro-batches per optimizer step: effective batch = workers x batch size x grad_accum_steps. Contrastive
    # sets (InfoNCE positives and negatives, Deep-CCA's batch statistics) stay per micro-batch.
    grad_accum_steps: int = 1
    constraint_batch_size: int = 32  # pairs per worker per micro-batch
    corpus_batch_size: int = 16  # sentences per worker per step
    static_batch_size: int = 64  # (word, static vector) rows per worker per step
    # sentence pairs per worker per step (objectives.tlm): the share of TLM sequences in a step of MLM + TLM is
    # parallel_batch_size / (parallel_batch_size + corpus_batch_size)
    parallel_batch_size: int = 16
    checkpoint_every: int = 50  # steps between checkpoints (the last step is always one)
    # > 0: also checkpoint once this many minutes have passed since the last checkpoint (rank 0's clock), whatever
    # the steps: a run whose steps are slow loses at most this much work to a failure
    checkpoint_every_minutes: float = 0.0
    # Worker failures (a killed process, a lost node) the run recovers from by itself, restarting the workers from
    # the last checkpoint at the same data position and random state. An error of the training code that comes
    # back at the same step after a restart ends the run then (distalign.train.failures)
    max_failures: int = 3
    # a one-worker Tune trial trains in the trial's own process (distalign.train.in_process), no worker group
    # started per trial; its failures are the trial's (the study's max_failures), not max_failures above
    trial_in_process: bool = True
    log_every: int = 10  # steps between the train/ and perf/ metrics logged
    seed: int = 0  # model initialisation, data order and masking (a trial's seed: its train.seed)
    # a directory: every rank appends the rows of each step's batches (with the step, and the epoch of corpus rows)
    # to a JSON lines file of its own there; for tests and debugging the data position
    trace_rows: str = ""
    gradient_checkpointing: bool = False  # recompute activations in the backward pass: less memory, more compute
    # torch.compile each transformer layer (regional compilation, dynamic shapes): faster steps on a GPU after a
    # first step that compiles (minutes for a large model); off by default
    torch_compile: bool = False
    # DeepSpeed settings merged over distalign's own (offload, overlap_comm, bucket sizes, ...): a JSON or
    # YAML file, then this mapping on top
    deepspeed_config_file: str = ""
    deepspeed_config: dict[str, Any] = field(default_factory=dict)  # DeepSpeed keys on top of deepspeed_config_file

    @property
    def in_trial_process(self) -> bool:
        """Whether a Tune trial of this config trains in the trial's process (``trial_in_process``, one worker)."""
        return self.trial_in_process and self.num_workers == 1

    def check(self) -> None:
        require(self.num_workers >= 1, "train.num_workers", "must be >= 1")
        require(
            0 <= self.min_workers <= self.num_workers,
            "train.min_workers",
            f"must be between 1 and train.num_workers={self.num_workers}, or 0 for exactly train.num_workers "
            f"workers (got {self.min_workers})",
        )
        require(self.cpus_per_worker > 0, "train.cpus_per_worker", "must be > 0")
        require(0 <= self.zero_stage <= 3, "train.zero_stage", "must be 0, 1, 2 or 3")
        require(
            self.engine == "deepspeed" or self.zero_stage == 0, "train.zero_stage", "ZeRO needs train.engine=deepspeed"
        )
        require(
            self.optimizer != "lamb" or self.zero_stage == 0,
            "train.optimizer",
            f"LAMB's trust ratio needs whole tensors, which ZeRO stage {self.zero_stage} splits into flat "
            "partitions: use train.zero_stage=0 or train.engine=ddp",
        )
        require(
            not (self.torch_compile and self.zero_stage == 3),
            "train.torch_compile",
            "ZeRO-3 gathers each layer's parameters in module hooks, which compiled layers would trace: "
            "use train.zero_stage <= 2, or train.torch_compile=false",
        )
        require(
            self.engine == "deepspeed" or not (self.deepspeed_config or self.deepspeed_config_file),
            "train.deepspeed_config",
            "needs train.engine=deepspeed",
        )
        require(
            not self.deepspeed_config_file or Path(self.deepspeed_config_file).is_file(),
            "train.deepspeed_config_file",
            f"file not found: {self.deepspeed_config_file!r}",
        )
        require(self.lr > 0, "train.lr", "must be > 0")
        require(self.max_steps >= 1, "train.max_steps", "must be >= 1")
        require(self.grad_accum_steps >= 1, "train.grad_accum_steps", "must be >= 1")
        require(self.epochs >= 0, "train.epochs", "must be >= 0 (0 = train.max_steps)")
        require(self.checkpoint_every >= 1, "train.checkpoint_every", "must be >= 1")
        require(self.checkpoint_every_minutes >= 0, "train.checkpoint_every_minutes", "must be >= 0 (0: steps only)")
        # DeepSpeed partitions ZeRO's optimizer state by the data-parallel size and refuses a checkpoint of another
        # size at load ("Automatic adjustment of ZeRO's optimizer state partitioning with a new world size is not
        # currently supported"): a run that shrank after a lost node would fail at every restart
        require(
            not (self.min_workers and self.min_workers < self.num_workers and self.zero_stage > 0),
            "train.min_workers",
            f"with train.zero_stage={self.zero_stage} a run cannot continue on fewer "
            f"workers: DeepSpeed loads ZeRO's optimizer shards only on the world size that wrote them "
            f"(train.num_workers={self.num_workers}); set train.min_workers=0 (or ={self.num_workers}), or "
            "train.zero_stage=0",
        )
        require(self.max_failures >= -1, "train.max_failures", "must be >= 0, or -1 for no limit")
        require(self.log_every >= 1, "train.log_every", "must be >= 1")
        require(self.constraint_batch_size >= 2, "train.constraint_batch_size", "must be >= 2")
        require(self.corpus_batch_size >= 1, "train.corpus_batch_size", "must be >= 1")
        require(self.parallel_batch_size >= 1, "train.parallel_batch_size", "must be >= 1")


@dataclass
class TransferEvalConfig:
    # Zero-shot transfer once training ends (distalign.transfer.training, `distalign transfer`'s protocol): each
    # model below fine-tuned on the tasks' source-language training sets, tested on the other languages; logged into
    # this run as transfer/<task>/<lang>/<metric> (+ _std over seeds) at the model's step, with a bar plot per task
    tasks: list[str] = field(default_factory=list)  # xnli, pawsx, wikiann, udpos, ...; empty = off
    # <data_dir>/<task>/<lang>/ as `distalign transfer --data-dir` reads it; empty: the synthetic world's tasks
    # (data.synthetic.transfer_examples > 0; source: its first language)
    data_dir: str = ""
    checkpoint: Literal["best", "last"] = "best"  # best: the one eval.select_by selects (the last when none does)
    at_steps: list[int] = field(default_factory=list)  # also these steps' kept checkpoints (local or remote)
    starting_model: bool = False  # also the model training started from, logged at step 0: the plots' reference bars
    # any other key of a transfer spec (distalign.transfer.transfer_spec.TransferSpec): source, languages, seeds,
    # finetune: {lr, epochs, ...}, num_workers, use_gpu, ...
    spec: dict[str, Any] = field(default_factory=dict)

    def check(self) -> None:
        require(
            bool(self.tasks) or not (self.data_dir or self.at_steps or self.starting_model or self.spec),
            "eval.transfer.tasks",
            "is empty (transfer off), yet other eval.transfer keys are set: name the tasks",
        )
        require(all(step >= 1 for step in self.at_steps), "eval.transfer.at_steps", "steps must be >= 1")
        require(
            not self.data_dir or Path(self.data_dir).is_dir(),
            "eval.transfer.data_dir",
            f"not a directory: {self.data_dir}",
        )


@dataclass(kw_only=True)
class EvalConfig:
    every: int = 50  # steps between in-loop evaluations (0 = only at start and end)
    # > 0: evaluate (and checkpoint) every this many epochs of the training pairs instead (BabelBERT code: 0.05)
    every_epochs: float = 0.0
    bli_max_pairs: int = 500  # held-out pairs per language pair evaluated in the loop
    # in-loop BLI queries: one per source word ("grouped"), or one per pair with the word's other
    # translations competing ("per_pair", as BabelBERT evaluates)
    bli_ranking: Literal["grouped", "per_pair"] = "grouped"
    # in-loop BLI only on pairs of these languages (empty = all)
    languages: list[LanguageCode] = field(default_factory=list)
    # test languages: their pairs never enter the in-loop BLI (nor do pairs with one of them); they are scored
    # once, after training, from the selected checkpoint, as test/bli/<pair>/mrr (BabelBERT §5.1)
    test_languages: list[LanguageCode] = field(default_factory=list)
    # <lang>_vocab.txt files (one word a line, most frequent first): in-loop BLI ranks each pair's targets among
    # the top vocab_size words, as BabelBERT validates (100K); empty: among the pairs' own targets
    vocab_dir: str = ""
    vocab_size: int = 100_000  # words of each <lang>_vocab.txt the in-loop BLI ranks among (eval.vocab_dir)
    # the score that ranks checkpoints (Ray keeps the best; the run's best-checkpoint tag): "bli", BabelBERT's
    # relative MRR gain on the held-out pairs; "mlm_loss", the MLM loss on data.validation_corpora (lowest
    # wins), as the static-contextual authors select
    select_by: Literal["bli", "mlm_loss"] = "bli"
    transfer: TransferEvalConfig = field(default_factory=TransferEvalConfig)

    def check(self) -> None:
        self.transfer.check()
        require(self.every >= 0, "eval.every", "must be >= 0")
        require(self.every_epochs >= 0, "eval.every_epochs", "must be >= 0")
        require(self.vocab_size >= 1, "eval.vocab_size", "must be >= 1")
        shared = sorted(set(self.languages) & set(self.test_languages))
        require(
            not shared,
            "eval.languages",
            f"shares {shared} with eval.test_languages: model selection must not see the test languages",
        )
        require(
            not self.vocab_dir or Path(self.vocab_dir).is_dir(), "eval.vocab_dir", f"not a directory: {self.vocab_dir}"
        )


@dataclass
class TrackingConfig:
    # MLflow tracking URI; empty = $MLFLOW_TRACKING_URI, else sqlite:///<DISTALIGN_HOME or cwd>/mlflow.db
    uri: str = ""
    experiment: str = "distalign"  # MLflow experiment of the run (created if missing)
    parent_run_id: str = ""  # set by Tune: the study's parent run
    tags: dict[str, str] = field(default_factory=dict)  # set on the run (a study: what the trial stands for)
    # every node's CPU, memory, disk, network and GPU use, logged as system/node<k>/... (0: off)
    system_metrics_every_s: float = 10.0
    # the selected checkpoint's model (best by eval.select_by, else the last) logged as an MLflow model
    # (transformers flavour, with its tokenizer) and registered under this name in the Model Registry; a study
    # registers its best trial's. Empty: not logged.
    registered_model_name: str = ""

    def check(self) -> None:
        require(
            not any(c in self.registered_model_name for c in "/:"),
            "tracking.registered_model_name",
            "must not contain '/' or ':' (MLflow's rule for model names)",
        )


@dataclass
class StorageConfig:
    # Local directory or URI (s3://bucket/prefix) for checkpoints; relative paths are under DISTALIGN_HOME.
    # Empty: $DISTALIGN_STORAGE (a cluster's runtime environment sets it), else "runs".
    path: str = ""
    # S3-compatible endpoint (MinIO, moto); empty: $DISTALIGN_STORAGE_ENDPOINT, else AWS's
    endpoint_url: str = ""
    keep_checkpoints: int = 2  # checkpoints kept besides the latest: the best by the selection score


@dataclass
class RunConfig:
    name: str = "quickstart"  # same name again = resume from the last checkpoint

    def check(self) -> None:
        require(bool(self.name) and "/" not in self.name, "run.name", "must be a non-empty name without '/'")


@dataclass(kw_only=True)
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

    def run_facts(self) -> RunFacts:
        """What the objective and stream plugins read of the run beside their own sections."""
        return RunFacts(
            seed=self.train.seed,
            static_batch_size=self.train.static_batch_size,
            max_seq_length=self.data.max_seq_length,
            pack_sequences=self.data.pack_sequences,
            sampling_alpha=self.data.sampling_alpha,
            has_static_vectors=bool(self.data.static_vectors),
            has_parallel_data=bool(self.data.parallel),
            max_word_tokens=self.model.max_word_tokens,
            tiny_model_layers=self.model.tiny.num_layers if self.model.name_or_path == "tiny" else None,
        )


# Checks of sections whose rules live in a higher layer, by section: ``eval.transfer``'s (the transfer tasks and their
# spec) in ``distalign.transfer.training``, which registers it when imported (imports keep running down). Every
# command that runs a config's training imports its module first.
SectionCheck = Callable[[ExperimentConfig], None]
SECTION_CHECKS: dict[str, SectionCheck] = {}


def register_section_check(section: str, check: SectionCheck) -> None:
    """Make ``validate`` (so ``load_config``) run ``check`` on every config; its errors name keys of ``section``."""
    SECTION_CHECKS[section] = check


def validate(config: ExperimentConfig) -> None:
    """Every check a run needs before Ray starts: each section's own values (its ``check``), then what
    spans sections: the data sources for the active objectives' streams and each active objective's
    own checks; then, on a config that passed those, the checks higher layers registered (``SECTION_CHECKS``: they
    read other sections). Errors name the dotted key; independent checks all run, and their errors are raised
    together (``ConfigErrors``)."""
    # the streams (torch, the tokenizers) are imported by a run's checks, not by reading a config
    from distalign.data.stream_plugins import STREAMS, CorpusSentencesStream, epoch_stream

    t, d, m, o = config.train, config.data, config.model, config.objectives
    problems = Problems()
    for section_check in (
        config.run.check,
        t.check,
        config.eval.check,
        m.check,
        config.tracking.check,
        lambda: validate_objectives(config),
        d.check,
    ):
        with problems.check():
            section_check()
    epochs = t.epochs or config.eval.every_epochs
    corpus_epochs = epochs and epoch_stream(o.streams()) == CorpusSentencesStream.name
    with problems.check():
        require(
            not (d.pack_sequences and corpus_epochs),
            "data.pack_sequences",
            "an epoch of a corpus run counts sentences, not packed sequences: use train.max_steps and eval.every, "
            "or set data.pack_sequences=false",
        )
    if config.tracking.registered_model_name:
        # MLflow's transformers flavour saves and loads the Hugging Face model alone
        extras = ["adapters"] * m.adapters.enabled + [
            f"objectives.{name}'s input language table"
            for name, (plugin, _) in o.active().items()
            if plugin.exported_input_table
        ]
        with problems.check():
            require(
                not extras,
                "tracking.registered_model_name",
                f"a model with {' and '.join(extras)} cannot be "
                "registered: MLflow's transformers flavour would load the base model without it",
            )
    held_out = d.validation_corpora if d.source == "files" else d.synthetic.validation_sentences
    with problems.check():
        require(
            not held_out or "mlm" in o.active(),
            "data.validation_corpora" if d.source == "files" else "data.synthetic.validation_sentences",
            "held-out sentences are scored by objectives.mlm, which is off",
        )
    with problems.check():
        require(
            config.eval.select_by != "mlm_loss" or bool(held_out),
            "eval.select_by",
            "mlm_loss needs held-out sentences: data.validation_corpora (files) or "
            "data.synthetic.validation_sentences > 0 (synthetic)",
        )
    transfer = config.eval.transfer
    world_tasks = d.source == "synthetic" and d.synthetic.transfer_examples > 0
    with problems.check():
        require(
            not transfer.tasks or bool(transfer.data_dir) or world_tasks,
            "eval.transfer.data_dir",
            "is needed (or a synthetic world with data.synthetic.transfer_examples > 0)",
        )
    with problems.check():
        require(
            2 <= d.max_seq_length <= m.tiny.max_length or m.name_or_path != "tiny",
            "data.max_seq_length",
            f"must be in [2, model.tiny.max_length={m.tiny.max_length}]",
        )
    if d.source == "files":
        readers, pair_users = o.readers(), [name for name, (plugin, _) in o.active().items() if plugin.uses_word_pairs]
        for stream in STREAMS.values():
            with problems.check():
                stream.check_sources(d, readers.get(stream.name, []) + (pair_users if stream.holds_word_pairs else []))
    if not problems:
        for section_check in SECTION_CHECKS.values():
            with problems.check():
                section_check(config)
    problems.raise_any()


def validate_parallel_source(src: ParallelSource, key: str) -> None:
    require(bool(src.lang1 and src.lang2), key, "needs lang1 and lang2")
    paired = bool(src.path1 or src.path2)
    require(
        bool(src.path) != paired and (not paired or bool(src.path1 and src.path2)),
        key,
        "needs either path (a TSV src<TAB>tgt) or both path1 and path2 (line-aligned files)",
    )
    for name in ("path", "path1", "path2"):
        path = getattr(src, name)
        require(not path or Path(path).is_file(), f"{key}.{name}", f"file not found: {path!r}")


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
    require(
        Path(src.path).is_dir() or Path(src.path).suffix in (".txt", ".jsonl", ".parquet"),
        f"{key}.path",
        "must end in .txt, .jsonl or .parquet (or be a directory of such files)",
    )


def validate_objectives(config: ExperimentConfig) -> None:
    """Weights, each active plugin's own checks, and at most one data-side preparer per stream."""
    o, facts = config.objectives, config.run_facts()
    for name, section in o.items():
        require(section.weight >= 0, f"objectives.{name}.weight", "must be >= 0")
    require(bool(o.active()), "objectives", "every objective has weight 0: nothing to train")
    preparers: dict[str, str] = {}
    for name, (plugin, section) in o.active().items():
        plugin.validate(section, facts, f"objectives.{name}")
        if plugin.prepares:  # two objectives cannot both transform (e.g. mask) the same batches
            other = preparers.setdefault(plugin.stream, name)
            require(
                other == name,
                f"objectives.{name}.weight",
                f"objectives.{other} and objectives.{name} both prepare (mask) the '{plugin.stream}' batches: "
                f"use one of them (set the other's weight to 0)",
            )
