"""Study files: what a study varies, and the validated experiment config of every trial.

A study file (``tuning/*.yaml``; its keys are the fields of ``StudyConfig``)::

    study: babel-sizes              # MLflow parent run name; trials are <study>-000, <study>-001, ...
    base: ../jobs/configs/quickstart.yaml   # experiment config, relative to this file
    overrides: [train.max_steps=60] # applied to every trial
    grid:                           # every combination is one trial
      data.max_constraints: [1000, 10000, 0]
      train.seed: [0, 1, 2]         # seeds: the summary gives mean ± std per configuration
    language_samples:               # optional: one trial dimension of language samples (BabelBERT §5.1)
      size: 10
      bins: 10
    metric: eval/bli/avg/mrr
    mode: max

The file is read by the loader of experiment configs (``distalign.config.load_dataclass``): an
unknown key or a wrong type is an error naming the dotted key. Every trial's config is built and
validated here, on the driver, before Ray starts. What a trial stands for (its grid point, its
language sample with d_typ and sim_train-test) travels in its config's ``tracking.tags``, so it is on
the trial's MLflow run and in the study's table.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from distalign.config import ConfigError, ExperimentConfig, load_config, load_dataclass
from distalign.languages import LanguageCode
from distalign.studies.trials import TAG

log = logging.getLogger("distalign")


@dataclass
class LanguageSampleStudy:
    """BabelBERT §5.1: samples of ``size`` languages drawn without the test languages, one per d_typ bin;
    each sample's trial trains on exactly ``per_pair`` constraints per pair of its languages, selects its
    checkpoint on validation pairs disjoint from the test languages and is scored on the test languages' pairs
    (``test/bli/avg/mrr``)."""

    size: int = 0  # languages per sample; 0 = no language-sample dimension
    num_samples: int = 1_000_000  # random samples drawn before binning (paper: 1M)
    bins: int = 10  # d_typ bins, one sample each (paper: 10)
    per_pair: int = 100  # constraints per language pair (paper: 100)
    # never sampled; their pairs are the test pairs (eval.test_languages), scored once after training from the
    # checkpoint selected on validation pairs (eval.languages' pairs without a test language)
    test_languages: list[LanguageCode] = field(default_factory=list)
    candidates: list[LanguageCode] = field(default_factory=list)  # empty: the base config's constraint languages
    seed: int = 0  # of the random samples


@dataclass
class SearchStudy:
    """A search instead of a grid: Optuna suggests configurations from ``space``, each trained ``seeds`` times
    (Tune's Repeater: Optuna learns from their mean); ASHA may stop poor trials early, judged on the metric
    reported at every in-loop evaluation."""

    # config key -> {loguniform: [low, high]}, {uniform: [low, high]}, {randint: [low, high]} or {choice: [...]}
    space: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    num_samples: int = 8  # configurations Optuna suggests
    seeds: int = 1  # runs per configuration, with train.seed, train.seed + 1, ...
    scheduler: Literal["fifo", "asha"] = "fifo"  # fifo: every trial runs to the end; asha: early stopping
    grace_period: int = 1  # evaluations a trial gets before ASHA may stop it
    reduction_factor: int = 2  # ASHA keeps 1 / reduction_factor of the trials at each rung
    seed: int = 0  # Optuna's sampler


@dataclass(kw_only=True)
class StudyConfig:
    study: str = "study"  # MLflow parent run name; trials are <study>-000, <study>-001, ...
    base: str = ""  # experiment config (absolute, or relative to the study file)
    overrides: list[str] = field(default_factory=list)  # dotted key=value, applied to every trial
    grid: dict[str, list[Any]] = field(default_factory=dict)  # config key -> values; every combination is a trial
    language_samples: LanguageSampleStudy = field(default_factory=LanguageSampleStudy)
    search: SearchStudy = field(default_factory=SearchStudy)  # instead of grid and language samples
    metric: str = "eval/bli/avg/mrr"  # reported per trial; the best trial is tagged on the parent run
    mode: Literal["min", "max"] = "max"  # whether the lowest or the highest metric is best
    # trials at once: 0 = as many as the cluster's CPUs and GPUs hold (``distalign.train.trial_resources``), now or
    # at its autoscaler's maximum, read again as nodes join (``distalign.studies.concurrency``); N = at most N
    max_concurrent_trials: int = 0
    # the trial function's own CPUs: it waits on its TorchTrainer, or trains its one worker in its process
    # (train.trial_in_process) in CPUs it reserves besides
    trial_cpus: float = 0.1
    # times Tune starts a failed trial again (its run resumes from its checkpoints); lost workers inside a
    # trial are train.max_failures' business
    max_failures: int = 1


STUDY_KEYS = {f.name for f in dataclasses.fields(StudyConfig)}
SEARCH_KINDS = ("loguniform", "uniform", "randint", "choice")


def _is_study_override(override: str) -> bool:
    return override.split("=", 1)[0].split(".", 1)[0].strip() in STUDY_KEYS


def _check(study: StudyConfig) -> None:
    for key, values in study.grid.items():
        if not values:
            raise ConfigError(f"grid.{key}: must be a non-empty list of values")
    samples, search = study.language_samples, study.search
    if search.space and (study.grid or samples.size):
        raise ConfigError("search: a study is a grid (with language samples) or a search, not both")
    if not study.grid and not samples.size and not search.space:
        raise ConfigError(
            "grid: must map config keys to non-empty lists of values (or set language_samples.size, or search.space)"
        )
    for key, spec in search.space.items():
        kind, values = next(iter(spec.items())) if len(spec) == 1 else ("", [])
        if (
            kind not in SEARCH_KINDS
            or not values
            or (kind != "choice" and (len(values) != 2 or values[0] >= values[1]))
        ):
            raise ConfigError(
                f"search.space.{key}: one of {{loguniform, uniform, randint}}: [low, high] with "
                f"low < high, or {{choice: [values]}}"
            )
    if search.space and (search.num_samples < 1 or search.seeds < 1):
        raise ConfigError("search: num_samples and seeds must be >= 1")
    if search.seeds > 1 and search.scheduler == "asha":
        raise ConfigError(
            "search: seeds > 1 with scheduler asha: early stops would bias the seeds' mean (Tune's "
            "Repeater); use scheduler fifo"
        )
    if samples.size and (samples.size < 2 or samples.bins < 1 or samples.per_pair < 1 or samples.num_samples < 1):
        raise ConfigError("language_samples: size must be >= 2, and bins, per_pair and num_samples >= 1")
    if samples.test_languages and not study.metric.startswith("test/"):
        raise ConfigError(
            f"metric: {study.metric} is scored on the validation pairs; with language_samples."
            f"test_languages a trial is scored on the test pairs after training: test/bli/avg/mrr"
        )
    if study.max_concurrent_trials < 0:
        raise ConfigError("max_concurrent_trials: must be >= 0 (0: as many as the cluster holds)")
    if study.trial_cpus <= 0:
        raise ConfigError("trial_cpus: must be > 0")
    if study.max_failures < 0:
        raise ConfigError("max_failures: must be >= 0")


def constraint_languages(config: ExperimentConfig) -> list[str]:
    """The languages the base config's constraints and training dictionaries are in."""
    from distalign.data.readers import read_constraints

    if config.data.source == "synthetic":
        return list(config.data.synthetic.languages)
    languages = {lang for src in config.data.dictionaries for lang in (src.lang1, src.lang2)}
    for path in config.data.constraints:
        table, _ = read_constraints(path)
        languages |= set(table["lang1"].unique().to_pylist()) | set(table["lang2"].unique().to_pylist())
    return sorted(languages)


def language_sample_points(
    study: StudyConfig, base: Path, overrides: list[str]
) -> list[tuple[list[str], dict[str, str]]]:
    """(overrides, tags) of each language sample's trials, drawn from the languages of the ``base`` config with
    ``overrides``; one empty point without a language-sample study."""
    from distalign.typology import diverse_samples

    samples = study.language_samples
    if not samples.size:
        return [([], {})]
    candidates = samples.candidates or constraint_languages(load_config(base, overrides))
    points = []
    for sample in diverse_samples(
        candidates, samples.size, samples.num_samples, samples.bins, samples.seed, samples.test_languages
    ):
        overrides = [
            f"data.constraint_languages={json.dumps(list(sample.languages))}",
            f"data.constraints_per_pair={samples.per_pair}",
        ]
        if samples.test_languages:  # selection on validation pairs without them; their pairs score the trial
            overrides.append(f"eval.test_languages={json.dumps(samples.test_languages)}")
        tags = {
            f"{TAG}languages": " ".join(sample.languages),
            f"{TAG}d_typ": f"{sample.diversity:.4f}",
            f"{TAG}sim_train_test": f"{sample.similarity:.4f}",
            f"{TAG}bin": str(sample.bin),
        }
        points.append((overrides, tags))
    return points


def search_points(study: StudyConfig) -> list[str]:
    """Overrides at every bound and choice of the search space: each must make a valid config."""
    return [
        f"{key}={json.dumps(value)}"
        for key, spec in study.search.space.items()
        for values in spec.values()
        for value in values
    ]


def load_study(
    path: str | Path, extra_overrides: list[str] | None = None
) -> tuple[StudyConfig, dict[str, ExperimentConfig]]:
    """The study file and the validated experiment config of every trial, by trial name. For a search, the
    trials are suggested as it runs: the one config returned is the base they all start from.

    An extra override whose first key is a study key (``grid.train.lr=[1e-3]``,
    ``max_concurrent_trials=2``) changes the study; any other applies to every trial (``train.max_steps=10``).
    """
    import distalign.transfer.training  # noqa: F401  (registers eval.transfer's check: load_config runs it)

    path = Path(path)
    extra_overrides = extra_overrides or []
    sections = {f.name for f in dataclasses.fields(ExperimentConfig)}
    for override in extra_overrides:  # else a mistyped study key is reported as a key of the trials' config
        first = override.split("=", 1)[0].split(".", 1)[0].strip()
        if first not in STUDY_KEYS | sections:
            raise ConfigError(
                f"unknown key '{first}' in override {override!r}: neither a study key "
                f"({', '.join(sorted(STUDY_KEYS))}) nor a section of the trials' config "
                f"({', '.join(sorted(sections))})"
            )
    study = load_dataclass(StudyConfig, path, [o for o in extra_overrides if _is_study_override(o)])
    _check(study)
    base = path.parent / study.base
    if not study.base or not base.is_file():
        raise ConfigError(f"base: experiment config not found: {base if study.base else '(empty)'}")
    trial_overrides = study.overrides + [o for o in extra_overrides if not _is_study_override(o)]
    if study.search.space:  # trials are suggested while the study runs: the base, then the space's corners, now
        name = f"{study.study}-base"
        trials = {name: load_trial_config(name, base, trial_overrides + [f"run.name={name}"])}
        for corner in search_points(study):
            load_config(base, trial_overrides + [corner])
        check_transfer_metric(study, trials)
        return study, trials
    samples = language_sample_points(study, base, trial_overrides)
    keys = list(study.grid)
    trials = {}
    for i, ((sample_overrides, sample_tags), values) in enumerate(
        itertools.product(samples, itertools.product(*study.grid.values()))
    ):
        name = f"{study.study}-{i:03d}"
        point = [f"{k}={json.dumps(v)}" for k, v in zip(keys, values)]  # JSON is valid YAML
        tags = {**sample_tags, **{f"{TAG}{k}": json.dumps(v) for k, v in zip(keys, values)}}
        trials[name] = load_trial_config(
            name,
            base,
            trial_overrides + sample_overrides + point + [f"run.name={name}", f"tracking.tags={json.dumps(tags)}"],
        )
    check_transfer_metric(study, trials)
    return study, trials


def load_trial_config(name: str, base: Path, overrides: list[str]) -> ExperimentConfig:
    """A trial's validated config (``load_config``); an error names the trial."""
    try:
        return load_config(base, overrides)
    except ConfigError as err:
        raise ConfigError(f"trial {name}: {err}") from err


def check_transfer_metric(study: StudyConfig, trials: dict[str, ExperimentConfig]) -> None:
    """A ``transfer/<task>/<lang>/<metric>`` study metric: every trial transfers to its task (``eval.transfer``), and
    the study is a grid (the metric comes once, after training; Optuna and ASHA read theirs from every in-loop
    evaluation)."""
    if not study.metric.startswith("transfer/"):
        return
    parts = study.metric.split("/")
    if len(parts) != 4:
        raise ConfigError(
            f"metric: {study.metric}: a transfer metric is transfer/<task>/<lang>/<metric> "
            f"(transfer/udpos/avg/acc, transfer/udpos/avg/delta)"
        )
    if study.search.space:
        raise ConfigError(
            f"metric: {study.metric} is scored once, after training (eval.transfer); a search (Optuna, "
            f"ASHA) reads its metric at every in-loop evaluation: use a grid"
        )
    for name, config in trials.items():
        if parts[1] not in config.eval.transfer.tasks:
            raise ConfigError(
                f"metric: {study.metric}: trial {name} does not transfer to {parts[1]} "
                f"(eval.transfer.tasks: {config.eval.transfer.tasks})"
            )
