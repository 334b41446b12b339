"""Print, as JSON, every run of an MLflow store with its status, seconds, engine params and the summary of its
perf/, startup/, loss and GPU metrics (run by ``figures.mlflow_runs`` in a child process).

    python -m distalign.tools.gpu_check.mlflow_runs sqlite:///$DISTALIGN_HOME/mlflow.db
"""

from __future__ import annotations

import json
import statistics
import sys

KEYS = ("perf/", "startup/", "Train/loss", "eval/bli/avg/mrr")
SYSTEM_KEYS = ("gpu_utilization", "gpu_memory_usage_megabytes", "cpu_utilization")  # of system/<node>/...
PARAMS = (
    "train.use_gpu",
    "train.engine",
    "train.zero_stage",
    "train.precision",
    "train.num_workers",
    "train.max_steps",
)


def summary(values: list[float]) -> dict:
    later = values[1:] or values  # the first window holds the warm-up
    return {
        "n": len(values),
        "first": values[0],
        "last": values[-1],
        "mean_after_first": statistics.fmean(later),
        "max": max(values),
    }


def runs(uri: str) -> list[dict]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    found = []
    for experiment in client.search_experiments():
        for run in client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"]):
            info, data = run.info, run.data
            metrics = {}
            for key in sorted(data.metrics):
                if key.startswith(KEYS) or (key.startswith("system/") and key.endswith(SYSTEM_KEYS)):
                    history = sorted(client.get_metric_history(info.run_id, key), key=lambda m: (m.step, m.timestamp))
                    metrics[key] = summary([m.value for m in history])
            found.append(
                {
                    "experiment": experiment.name,
                    "name": info.run_name,
                    "status": info.status,
                    "seconds": (info.end_time - info.start_time) / 1000 if info.end_time else None,
                    "params": {k: v for k, v in data.params.items() if k in PARAMS},
                    "metrics": metrics,
                }
            )
    return found


if __name__ == "__main__":
    print(json.dumps(runs(sys.argv[1])))
