"""How many trials of a study run at once, re-read while the study runs.

A trial holds more than Tune sees: Tune reserves only the trial function's share (``trial_function_resources``),
while its TorchTrainer asks for its workers later. Left to Tune's resource queue, every trial would start and
wait on its workers; so a study caps the trials it starts at what the cluster can hold (``concurrent_trials``).

The cluster's size is the larger of what is there now (``ray.cluster_resources()``) and what its autoscaler may
grow to (the node groups' resources x their ``max_count``, capped by the config's ``max_resources``: the cluster
config the autoscaler publishes in the GCS, which Ray Data reads the same way). An autoscale-from-0 cluster then
runs as many trials as its largest size holds, and the autoscaler adds the nodes their workers ask for. Tune fixes
``max_concurrent_trials`` when the Tuner is made, so the cap lives in the search algorithm instead
(``ClusterSizedVariants`` for a grid, ``ClusterSizedLimiter`` for a search): it is read again at most every
``REREAD_S`` seconds, so nodes that join a cluster without an autoscaler (``ray start --address``) raise it too.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from ray.tune.search import BasicVariantGenerator, ConcurrencyLimiter

from distalign.train.trial_resources import trials_that_fit

log = logging.getLogger("distalign")
REREAD_S = 30.0  # seconds between two reads of the cluster's size


def autoscaler_max_resources(cluster_config) -> dict[str, float]:
    """What the autoscaler's ``ClusterConfig`` (``ray.core.generated.autoscaler_pb2``) lets the cluster grow to: per
    resource, the sum over node groups of resources x ``max_count`` (``math.inf`` for an unbounded group,
    ``max_count`` -1), capped by ``max_resources``; empty without a config."""
    if cluster_config is None:
        return {}
    grown: dict[str, float] = {}
    for group in cluster_config.node_group_configs:
        count = math.inf if group.max_count == -1 else group.max_count
        for kind, amount in group.resources.items():
            if count and amount:
                grown[kind] = grown.get(kind, 0.0) + count * amount
    return {kind: min(amount, cluster_config.max_resources.get(kind, math.inf)) for kind, amount in grown.items()}


def cluster_capacity() -> dict[str, float]:
    """The cluster's CPUs, GPUs, ... now or at its autoscaler's maximum, whichever is larger (module docstring)."""
    import ray
    import ray._private.state

    now = ray.cluster_resources()
    # private, but the one place Ray keeps the autoscaler's node groups (Ray Data's autoscaler reads it too)
    most = autoscaler_max_resources(ray._private.state.state.get_cluster_config())
    return {kind: max(now.get(kind, 0.0), most.get(kind, 0.0)) for kind in now.keys() | most.keys()}


class ClusterLimit:
    """The study's cap on trials at once, from ``capacity()`` (``cluster_capacity``) read again once ``REREAD_S``
    have passed; each change is logged. Picklable: Tune saves the search algorithm that holds it."""

    def __init__(
        self,
        need: dict[str, float],
        trials: int,
        capacity: Callable[[], dict[str, float]] = cluster_capacity,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.need, self.trials, self.capacity, self.clock = need, trials, capacity, clock
        self.limit, self.read_at = 0, -math.inf

    def __call__(self) -> int:
        if self.clock() - self.read_at >= REREAD_S:
            self.read_at = self.clock()
            limit = trials_that_fit(self.need, self.capacity(), self.trials)
            if limit != self.limit:
                log.info(
                    "trials at once: %d (what the cluster, or its autoscaler, holds of trials of %s)", limit, self.need
                )
            self.limit = limit
        return self.limit

    def __getstate__(self) -> dict:  # a restored study reads the cluster afresh
        return {"need": self.need, "trials": self.trials, "capacity": self.capacity, "clock": self.clock}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)  # type: ignore[misc]


class ClusterSizedVariants(BasicVariantGenerator):
    """A grid's trials, started while fewer than ``limit()`` run."""

    def __init__(self, limit: ClusterLimit):
        super().__init__(max_concurrent=1)
        self.limit = limit

    def next_trial(self):
        self.max_concurrent = self.limit()
        return super().next_trial()


class ClusterSizedLimiter(ConcurrencyLimiter):
    """A searcher's suggestions, made while fewer than ``limit()`` trials run."""

    def __init__(self, searcher, limit: ClusterLimit):
        super().__init__(searcher, max_concurrent=1)
        self.limit = limit

    def suggest(self, trial_id: str):
        self.max_concurrent = self.limit()
        return super().suggest(trial_id)
