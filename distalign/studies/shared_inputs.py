"""A study's prepared inputs, made once per distinct input and shared by the trials that read the same.

``prepare_data``'s result depends on the config's data, model, eval and storage sections, on what it reads of
the objectives (the streams they read, the static targets' settings, the parallel share, which objectives train on
word pairs) and on the train keys it reads (the seed that samples pairs, generates the world and initialises the
tiny model; the batch sizes and worker counts its checks compare against): ``inputs_key`` is the config without
the trial's own names and places (``run``, ``tracking``, ``data.output_dir``) and without what no input depends on
(lr, steps, objective weights and temperatures, ...). Trials with the same key get the same prepared inputs by
construction.

On the driver, before Ray starts, each distinct input is checked and prepared once (``check_trials``; each model
looked up once, however many inputs name it), and every problem is raised together, each naming its trial. Once
Ray is up each prepared result is put in the object store once (``share``); the trials receive the references
(``SharedInputs``, passed with ``tune.with_parameters``) and each fetches only its own. With ``storage.path`` on
S3 the driver's local files (the tiny model, local corpora) are staged once per distinct input under
``<storage.path>/<study>-inputs/<key>/inputs`` first, so a trial on any node reads them. A trial whose key the
driver did not prepare (a search's suggested point or repeat that changes an input) prepares its own, as a run
does.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import Any

from distalign.config import ConfigError, ExperimentConfig
from distalign.errors import Problems
from distalign.model_store.locate import each_model_checked_once
from distalign.preparation.cache import content_key
from distalign.preparation.prepared import PreparedData

log = logging.getLogger("distalign")
# the train keys prepare_data and its checks read (the seed; sizes and counts per worker); the others (lr, steps,
# ...) change no input
INPUT_TRAIN_KEYS = (
    "seed",
    "num_workers",
    "min_workers",
    "batch_sizes",
)


def inputs_key(config: ExperimentConfig) -> str:
    """What a trial's preparation and its checks read from its config: trials that share it share both."""
    data = config.to_dict()
    data["train"] = {key: data["train"][key] for key in INPUT_TRAIN_KEYS}
    objectives = config.objectives  # what preparation reads of them: not their weights, temperatures, ...
    data["objectives"] = {
        "streams": sorted(objectives.streams()),
        "static": data["objectives"]["static"],
        "parallel_share": objectives.tlm.parallel_share,
        "word_pairs": sorted(name for name, (plugin, _) in objectives.active().items() if plugin.uses_word_pairs),
    }
    del data["run"], data["tracking"], data["data"]["output_dir"]  # the trial's own names and places
    return json.dumps(data, sort_keys=True, default=str)


def check_trial(name: str, config: ExperimentConfig) -> tuple[PreparedData | None, list[ConfigError]]:
    """``distalign train``'s checks of one trial (``distalign.train.preflight``) without the cluster's size: its
    prepared inputs, or its problems, each naming the trial."""
    from distalign.train.preflight import check_run

    found, prepared = Problems(), None
    with found.check():
        prepared = check_run(config, resources=False).prepared
        if prepared.test_pairs and config.eval.select_by == "bli" and not prepared.eval_pairs:
            raise ConfigError(
                f"eval.test_languages {config.eval.test_languages} leave no validation pair to "
                f"select checkpoints on (eval.languages {config.eval.languages or 'all'}; a "
                f"validation pair has no test language)"
            )
    return (None if found else prepared), [ConfigError(f"trial {name}: {error}") for error in found.errors]


def check_trials(trials: dict[str, ExperimentConfig]) -> dict[str, PreparedData]:
    """Every distinct trial's inputs (``inputs_key``) checked and prepared once, on the driver before Ray starts;
    every trial's problems are raised together. What the checks build (worlds, tiny models) lands in the shared
    cache (``distalign.preparation.cache``), where the next distinct input finds it. The cluster's size is the
    study's to check (``concurrent_trials``). Returns the prepared inputs by ``inputs_key``."""
    firsts: dict[str, str] = {}  # key -> the first trial with it
    for name, config in trials.items():
        firsts.setdefault(inputs_key(config), name)
    # one after another: two processes were slower here (4 distinct inputs, 2 shared cores: 5.1 s against 3.0 s)
    with each_model_checked_once():  # inputs differ, their model mostly not: one look at the Hub, not one each
        outcomes = [check_trial(name, trials[name]) for name in firsts.values()]
    problems = Problems()
    problems.errors += [error for _, errors in outcomes for error in errors]
    problems.raise_any()
    log.info("inputs of the %d trials checked and prepared (%d distinct)", len(trials), len(firsts))
    return {key: prepared for key, (prepared, _) in zip(firsts, outcomes)}


@dataclass(frozen=True)
class SharedInputs:
    """The object-store references of a study's prepared inputs, by ``inputs_key``: what every trial receives."""

    refs: dict[str, Any]  # inputs_key -> ray.ObjectRef of a PreparedData

    def prepared(self, config: ExperimentConfig) -> PreparedData | None:
        """The trial's prepared inputs, fetched from the object store; None when the study prepared none for it."""
        import ray

        ref = self.refs.get(inputs_key(config))
        if ref is None:
            log.info(
                "%s: inputs the study did not prepare (a suggested point changes one): preparing them", config.run.name
            )
            return None
        return ray.get(ref)


def staged_for_trials(study: str, key: str, inputs: PreparedData, config: ExperimentConfig) -> PreparedData:
    """``inputs`` as a trial on any node reads them: with ``storage.path`` on S3, the driver's local files (the tiny
    model, local corpora) staged once per distinct input under ``<storage.path>/<study>-inputs/<key hash>``, not once
    per trial; unchanged on local (shared) storage."""
    from distalign.preparation.staging import stage_inputs

    if not config.storage_is_remote:
        return inputs
    place = dataclasses.replace(config.run, name=f"{study}-inputs/{content_key(key)}")
    return stage_inputs(inputs, dataclasses.replace(config, run=place))


def share(study: str, prepared: dict[str, PreparedData], trials: dict[str, ExperimentConfig]) -> SharedInputs:
    """Each prepared result staged for the trials (``staged_for_trials``) and put in the object store once. Needs
    Ray up."""
    import ray

    configs = {inputs_key(config): config for config in reversed(trials.values())}  # a config of each key
    refs = {key: ray.put(staged_for_trials(study, key, inputs, configs[key])) for key, inputs in prepared.items()}
    log.info("study %s: %d prepared inputs in the object store, shared by %d trials", study, len(refs), len(trials))
    return SharedInputs(refs)
