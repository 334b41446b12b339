"""What ``distalign train`` prints when a run ends: its MLflow run, checkpoints, the first and last values of the
headline metrics, and the next commands (the MLflow UI; the synthetic world's transfer tasks)."""

from __future__ import annotations

# a tiny model on a few hundred examples: XTREME's settings are meant for base-size models on large training sets
# (lr 2e-5; a dev evaluation every 200/500 steps would never come)
SYNTHETIC_TRANSFER_FLAGS = "--tasks udpos,pawsx --lr 1e-3 --epochs 5 --select-every 0 --seeds 2"


def print_summary(config, outcome) -> None:
    from distalign.tracking import client_for, run_url

    client = client_for(config.tracking.uri)
    print("\n[distalign] done")
    print(f"  MLflow run:  {outcome.run_id} (experiment '{config.tracking.experiment}', {config.tracking.uri})")
    print(f"  checkpoint:  {outcome.checkpoint or '(none)'}")
    if outcome.best_checkpoint:
        print(f"  best (eval/selection/rel_mrr_gain): {outcome.best_checkpoint}")
    for key in ("Train/loss", "eval/bli/avg/mrr", "eval/selection/rel_mrr_gain"):
        history = sorted(client.get_metric_history(outcome.run_id, key), key=lambda m: m.step)
        if history:
            first, last = history[0], history[-1]
            print(f"  {key}: {first.value:.4f} (step {first.step}) -> {last.value:.4f} (step {last.step})")
    if not config.tracking.uri.startswith(("http://", "https://")):
        print(f"  open the UI: mlflow ui --backend-store-uri {config.tracking.uri} --port 5000")
    experiment = client.get_run(outcome.run_id).info.experiment_id
    print(f"  the run in the UI: {run_url(config.tracking.uri, experiment, outcome.run_id)}")
    command = synthetic_transfer_command(config, outcome.checkpoint)
    if command:
        print(f"  zero-shot transfer on the world's tasks: {command}")


def synthetic_transfer_command(config, checkpoint: str) -> str:
    """The ``distalign transfer`` command for the synthetic world's tasks (``data.synthetic.transfer_examples``),
    from its first language; "" when the run has none."""
    synthetic = config.data.synthetic
    if config.data.source != "synthetic" or not synthetic.transfer_examples or not checkpoint:
        return ""
    from distalign.preparation.inputs import synthetic_world

    tasks = synthetic_world(config).transfer_tasks  # the cached world: found, not generated again
    return (
        f"distalign transfer {checkpoint} {SYNTHETIC_TRANSFER_FLAGS} --data-dir {tasks} "
        f"--source {synthetic.languages[0]}"
    )
