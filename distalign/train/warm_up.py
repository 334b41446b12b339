"""Ray task processes made ready for a run's data tasks while its training workers start.

The first batches of every stream are read and tokenised by Ray tasks (``distalign.preparation.ray_streams``). A
task's first run in a new worker process pays for the process, its imports (Ray, pyarrow, transformers) and the
run's tokenizer: seconds, on the way to the first step. Started by the driver as soon as it has joined Ray, these
processes do that work while Ray Train starts the workers; then they sit idle, and the workers' first data tasks
run in them (Ray gives a job's tasks its idle task processes, whoever submits them; a training worker's own
processes are actors and never take them). A node keeps as many idle processes as it has CPUs (Ray's
``num_workers_soft_limit``; a local cluster keeps more, ``distalign.ray_session``), so no more are started.
"""

from __future__ import annotations

import ray

from distalign.preparation.ray_streams import staged_tokenizer


@ray.remote(num_cpus=0)  # takes no CPU from the run: started at once, beside Ray Train's workers
def _ready_for_data_tasks(tokenizer_path: str, endpoint_url: str) -> None:
    staged_tokenizer(tokenizer_path, endpoint_url)  # kept by the process (``load_tokenizer``'s cache)


def start_data_task_processes(count: int, tokenizer_path: str, endpoint_url: str) -> list[ray.ObjectRef]:
    """Start up to ``count`` task processes (at most one per CPU of the cluster), spread over its nodes, each
    loading the run's tokenizer; returns their references (nothing waits for them: a failure there shows again,
    named, in the data task that meets it)."""
    count = min(count, int(ray.cluster_resources().get("CPU", 1)))
    ready = _ready_for_data_tasks.options(scheduling_strategy="SPREAD")
    return [ready.remote(tokenizer_path, endpoint_url) for _ in range(count)]
