"""What ``distalign eval`` runs: its spec (a ``--spec`` YAML file, flags and overrides map to it).

Kept apart from the runner, with light imports only: the command line sets up its flags and their defaults from
it without loading the runner's libraries.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distalign.eval.suite_spec import SuiteSpec


@dataclass
class EvalTrackingConfig:
    uri: str = ""  # MLflow store; empty = $MLFLOW_TRACKING_URI, else sqlite:///<DISTALIGN_HOME or cwd>/mlflow.db
    # experiment of the eval run (a checkpoint whose training run the store knows: a child run in the run's own)
    experiment: str = "distalign-eval"
    enabled: bool = True  # false: write files only


@dataclass(kw_only=True)
class EvalSpec:
    """What ``distalign eval`` runs (a ``--spec`` YAML file maps to it)::

    model: xlm-roberta-base            # or checkpoint: runs/quickstart/checkpoint_...
    suite: {eval_dir: /data/benchmarks/eval, tasks: [bli, word_alignment], bli_pairs: [de-en], max_queries: 500}
    layer: -1
    tracking: {experiment: my-evals}
    """

    checkpoint: str = ""  # distalign checkpoint directory (its eval run is a child run of its training run)
    model: str = ""  # Hugging Face model directory or hub name; exactly one of checkpoint and model
    suite: SuiteSpec = field(default_factory=SuiteSpec)
    layer: int | None = None  # score only this layer (negative counts from the last); null = every layer
    output_dir: str = ""  # tables and plots (default <DISTALIGN_HOME>/eval_results/<model>-<time>)
    cache_dir: str = ""  # encoding cache (default <DISTALIGN_HOME>/.cache/encodings)
    cpus_per_task: float = 1.0  # CPUs per Ray encoding/scoring task
    use_gpu: bool = False  # encode on a GPU per encoding task
    tracking: EvalTrackingConfig = field(default_factory=EvalTrackingConfig)
