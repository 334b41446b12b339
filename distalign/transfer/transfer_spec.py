"""What ``distalign transfer`` runs: its spec (a ``--spec`` YAML file, flags and overrides map to it).

Kept apart from the runner, with light imports only: the command line sets up its flags and their defaults from
it without loading the runner's libraries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from distalign.eval.eval_spec import EvalTrackingConfig
from distalign.languages import LanguageCode


@dataclass
class FineTuneOverrides:
    """Hyper-parameters laid over every task's own (null: the task's value, from its named source)."""

    lr: float | None = None
    batch_size: int | None = None  # global: all workers together
    epochs: int | None = None
    max_length: int | None = None
    select_every: int | None = None  # optimizer steps between dev evaluations; 0 = each epoch's end


@dataclass
class TransferTrackingConfig(EvalTrackingConfig):
    experiment: str = "distalign-transfer"  # the experiment of the parent run and its child runs


@dataclass(kw_only=True)
class TransferSpec:
    model: str = ""  # a Hugging Face model directory, a distalign checkpoint directory, or a hub name
    tasks: tuple[str, ...] = ("xnli",)  # names in distalign.transfer.tasks.registry.TRANSFER_TASKS
    data_dir: str = ""  # <data_dir>/<task>/<lang>/: a save_to_disk folder or plain files (distalign.transfer.data)
    hub: bool = False  # load what data_dir lacks from the Hugging Face Hub (datasets.load_dataset)
    hub_configs: dict[str, str] = field(default_factory=dict)  # "udpos:de": "de_hdt" (a Hub config per task:lang)
    # TyDiQA-GoldP's training data (XTREME's SRC): "squad" (SQuAD v1.1, XTREME's default) or "tydiqa" (its own
    # English train set; its English dev set selects)
    tydiqa_train: Literal["squad", "tydiqa"] = "squad"
    source: LanguageCode = LanguageCode("en")  # the fine-tuning language
    # target languages; empty = every <data_dir>/<task>/<lang> folder but source
    languages: tuple[LanguageCode, ...] = ()
    targets: dict[str, tuple[LanguageCode, ...]] = field(default_factory=dict)  # per task, over `languages`
    select_on: Literal["source", "target"] = "source"  # the dev sets that pick the epoch (XTREME: source)
    # a model with adapters (BabelBERT's): "adapters" trains the adapters and the task head, encoder frozen
    # (the paper's adapter regime); "all" trains every parameter
    adapter_training: Literal["adapters", "all"] = "adapters"
    seeds: int = 3  # fine-tuning runs per task: seeds seed, seed + 1, ...
    seed: int = 0
    finetune: FineTuneOverrides = field(default_factory=FineTuneOverrides)
    max_train_examples: int = 0  # 0 = all (a quick look: the first N)
    max_eval_examples: int = 0  # per dev/test set, 0 = all
    num_workers: int = 1  # Ray Train workers per fine-tuning run
    cpus_per_worker: float = 1.0
    use_gpu: bool = False  # one GPU per worker, NCCL
    output_dir: str = ""  # default <DISTALIGN_HOME>/transfer_results/<model>-<time>
    # summary.csv files (or the folders holding them) of earlier evaluations, e.g. of the starting model: their
    # scores are bars beside this model's in each task's plot, labelled by their folder's name
    compare_to: tuple[str, ...] = ()
    storage_path: str = ""  # Ray Train's run storage (shared by every node); default <output_dir>/ray
    tracking: TransferTrackingConfig = field(default_factory=TransferTrackingConfig)
