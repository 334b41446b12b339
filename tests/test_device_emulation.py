"""Every objective's training step, the in-loop evaluation and transfer fine-tuning on an emulated GPU
(``device_emulation.py``): no host tensor meets a device tensor, and the host syncs of a steady-state step stay
within a budget. ``pytest -s`` prints the table of syncs per objective with the line of each.

One steady-state step: the third, after two warm-up steps (lazy optimizer state, first-step branches), of the real
``TrainingRecipe`` (DDP over a gloo group of one) on the tiny configs, shrunk as the other recipe tests shrink them.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from conftest import QUICKSTART, REPO, SENSE_AWARE_SMALL, SMALL, free_port
from device_emulation import EMULATED, DeviceEmulation, DeviceMixError, Sync, summary

CONFIGS = REPO / "jobs" / "configs"
HERE = Path(__file__).resolve().parent
WARMUP_STEPS = 2

# objective -> (config, overrides): each objective alone where its config allows, else as shipped
OBJECTIVES = {
    "mlm": (QUICKSTART, ["objectives.lexical.weight=0"]),
    "lexical_type": (QUICKSTART, ["objectives.mlm.weight=0"]),
    "lexical_sense": (CONFIGS / "babelbert_sense_adapters_tiny.yaml", []),  # through adapters, with the gloss term
    "align_mlm": (CONFIGS / "align_mlm_tiny.yaml", []),  # MLM + the alignment term
    "dict_mlm": (CONFIGS / "dict_mlm_tiny.yaml", []),
    "static_align": (
        CONFIGS / "static_align_tiny.yaml",
        [  # MLM + MSE to the derived vectors, derived cheaply
            "train.static_batch_size=64",
            "data.synthetic.validation_sentences=24",
            "objectives.static.extract_epochs=1",
            "objectives.static.align_iterations=0",
        ],
    ),
    "sense_aware": (CONFIGS / "sense_aware_tiny.yaml", SENSE_AWARE_SMALL),  # past its warm-up (2 steps)
    "tlm": (
        QUICKSTART,
        [
            "objectives.mlm.weight=0",
            "objectives.lexical.weight=0",
            "objectives.tlm.weight=1",
            "data.parallel=[{path: PAIRS, lang1: xa, lang2: xb}]",
        ],
    ),
}
# Host syncs a steady-state step may make (never raise one without a reason in the commit): none, but at
# sense-aware's refits (every objectives.sense_aware.refit_every steps, here every 2nd: the SVD's error check, two
# on CUDA, and the pruning's two counts), which the counted step is. tests/test_cuda_steps.py holds a GPU to it
# (2026-11-28, H200: 0 in every other objective's step, CUDA's own sync debugging counting).
SYNC_BUDGET = {
    "mlm": 0,
    "lexical_type": 0,
    "lexical_sense": 0,
    "align_mlm": 0,
    "dict_mlm": 0,
    "static_align": 0,
    "sense_aware": 4,
    "tlm": 0,
    "transfer_step": 0,
}


@pytest.fixture(scope="module")
def group():
    """A gloo group of one for the whole module (the recipes and DDP need one)."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


# ------------------------------------------------------------------------------------------------ the emulation itself


def _host_mix(device_tensor, host_tensor):  # this file is the "package" of the self-tests
    return device_tensor + host_tensor


def _reads_the_host(device_tensor):
    return device_tensor.sum().item(), device_tensor[device_tensor > 0], device_tensor.tolist(), device_tensor.cpu()


def _line_of(function, text: str) -> int:
    lines, start = __import__("inspect").getsourcelines(function)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_a_host_tensor_meeting_a_device_tensor_fails_at_its_line():
    emulation = DeviceEmulation(root=HERE)
    with emulation:
        on_device = torch.ones(4).to(EMULATED)
        assert emulation.on_device(on_device) and on_device.device == EMULATED
        with pytest.raises(DeviceMixError) as raised:
            _host_mix(on_device, torch.arange(4))  # a host arange: no device=
        _host_mix(on_device, torch.arange(4, device=on_device.device))  # on the data's device: fine
        _host_mix(on_device, torch.tensor(2.0))  # a 0-dim host scalar: CUDA takes it
    assert "aten.add.Tensor" in str(raised.value)
    assert f"test_device_emulation.py:{_line_of(_host_mix, 'device_tensor + host_tensor')} (_host_mix)" in str(
        raised.value
    )
    assert "made by arange" in str(raised.value)


def test_host_syncs_are_counted_with_their_lines_and_host_reads_are_free():
    emulation = DeviceEmulation(root=HERE)
    with emulation:
        on_device, on_host = torch.randn(6).to(EMULATED), torch.randn(6)
        with emulation.counting() as syncs:
            _reads_the_host(on_device)
            on_host.sum().item(), on_host[on_host > 0], on_host.tolist()  # host-side: no sync
        moved = on_device.cpu()
    line = _line_of(_reads_the_host, "return device_tensor.sum()")
    where = f"tests/test_device_emulation.py:{line} (_reads_the_host)"
    assert [(s.kind, s.where) for s in syncs] == [
        (kind, where) for kind in ("item", "boolean-mask index", "tolist", "cpu")
    ]
    assert moved is not on_device and not emulation.on_device(moved) and emulation.on_host(moved)


def test_a_cuda_correct_snippet_passes_without_syncs():
    emulation = DeviceEmulation(root=HERE)
    layer = torch.nn.Linear(4, 3)
    with emulation:
        layer.to(EMULATED)
        emulation.mark_module(layer)
        batch = emulation.to_device({"x": torch.randn(5, 4), "labels": torch.tensor([0, 2, -100, 1, -100])}, EMULATED)
        with emulation.counting() as syncs:
            logits = layer(batch["x"])
            keep = batch["labels"] != -100
            positions = torch.arange(5, device=batch["x"].device)
            weights = keep.float() / keep.sum().clamp(min=1)  # no boolean-mask selection
            loss = (
                torch.nn.functional.cross_entropy(logits, batch["labels"].clamp(min=0), reduction="none") * weights
            ).sum() + 0 * positions.sum()
            loss.backward()
            logits[torch.tensor(1)]  # a 0-dim host index
            torch.optim.SGD(layer.parameters(), lr=0.1).step()
    assert syncs == [] and emulation.on_device(loss) and emulation.on_device(layer.weight.grad)


# ------------------------------------------------------------------------------------------------ the objectives


@functools.cache
def _parallel_pairs(directory: str) -> str:
    """Translation pairs of 1 to 8 made-up words a side, for TLM (as test_recipe.py makes them)."""
    path = Path(directory) / "pairs.tsv"
    path.write_text(
        "".join(
            " ".join(f"ka{i}" for i in range(n % 8 + 1)) + "\t" + " ".join(f"bo{i}" for i in range(n % 5 + 1)) + "\n"
            for n in range(64)
        )
    )
    return str(path)


class Measured:
    """What one objective's run under the emulation gave: the steady-state step's syncs, the evaluation's (where
    evaluated), or the mix it failed on."""

    def __init__(
        self, step: list[Sync] | None = None, evaluation: list[Sync] | None = None, mix: DeviceMixError | None = None
    ):
        self.step, self.evaluation, self.mix = step, evaluation, mix


def run_under_emulation(name: str, home: Path, count_eval: bool = False) -> Measured:
    """The objective's setup, 2 warm-up steps and one counted step under the emulation; with ``count_eval`` also
    ``recipe.evaluate()``'s syncs. A mix is returned, not raised."""
    import distalign.train.recipe as recipe_module
    from distalign.config import load_config
    from distalign.preparation.inputs import prepare_data
    from distalign.preparation.ray_streams import local_streams
    from distalign.train.recipe import TrainingRecipe
    from distalign.train.trainer import plan_training

    path, overrides = OBJECTIVES[name]
    overrides = [o.replace("PAIRS", _parallel_pairs(str(home))) for o in overrides]
    config = load_config(path, SMALL + overrides + [f"run.name=emulated-{name.replace('_', '-')}"])
    prepared = prepare_data(config)
    emulation = DeviceEmulation()
    real_to_device = recipe_module.to_device
    recipe_module.to_device = emulation.to_device  # a device copy of each batch tensor, the host one kept apart
    try:
        recipe = TrainingRecipe(plan_training(config, prepared, mlflow_run_id=""), device=EMULATED)
        with emulation:
            recipe.setup()
            emulation.mark_module(recipe.engine.module)
            streams = local_streams(prepared, config)
            for _ in range(WARMUP_STEPS):
                recipe.step([recipe.next_batches(streams)])
            batches = [recipe.next_batches(streams)]  # host-side trimming: not the step's
            with emulation.counting() as step:
                recipe.step(batches)
            evaluation = None
            if count_eval:
                with emulation.counting() as evaluation:
                    recipe.evaluate()
        return Measured(step, evaluation)
    except DeviceMixError as mix:
        return Measured(mix=mix)
    finally:
        recipe_module.to_device = real_to_device


@pytest.fixture(scope="module")
def measure(group, distalign_home):
    """``measure(name)``: ``run_under_emulation`` once per objective in the module; the evaluation is counted where
    it differs (BLI: mlm; BLI and the MLM validation loss: static_align)."""
    results: dict[str, Measured] = {}

    def run(name: str) -> Measured:
        if name not in results:
            results[name] = run_under_emulation(name, distalign_home, count_eval=name in ("mlm", "static_align"))
        return results[name]

    return run


def test_a_host_tensor_made_inside_the_step_fails_the_recipe(group, distalign_home, monkeypatch):
    """The recipe path is wired to the emulation: a host tensor added to the loss inside the module's forward (the
    bug class of the first GPU run) fails the step, naming the engine's line that called the forward."""
    from distalign.train.module import TrainingModule

    forward = TrainingModule.forward

    def buggy(self, *args, **kwargs):
        losses = forward(self, *args, **kwargs)
        return losses | {"loss": losses["loss"] + torch.zeros(1)}  # host: no device=

    monkeypatch.setattr(TrainingModule, "forward", buggy)
    measured = run_under_emulation("lexical_type", distalign_home)
    assert measured.mix is not None and "aten.add.Tensor" in str(measured.mix)
    assert "distalign/train/engine.py" in str(measured.mix) and "made by zeros" in str(measured.mix)


@pytest.mark.parametrize("name", sorted(OBJECTIVES))
def test_the_objectives_step_keeps_host_and_device_apart(measure, name):
    measured = measure(name)
    assert measured.mix is None, f"{name}: {measured.mix}"
    assert measured.step is not None


# ------------------------------------------------------------------------------------------------ transfer fine-tuning


@pytest.fixture(scope="module")
def transfer(group, tmp_path_factory):
    """One steady-state ``finetune.train_step`` (XNLI, the model's DDP wrapper) and a whole one-epoch ``fine_tune``
    (2 steps, the dev scoring, the test predictions) under the emulation: their syncs."""
    from transfer_data import save_task, tiny_model

    from distalign.models.loading import load_tokenizer
    from distalign.transfer import finetune
    from distalign.transfer.data import read_split
    from distalign.transfer.tasks.base import FineTuneSettings
    from distalign.transfer.tasks.pair import XNLITask

    root = tmp_path_factory.mktemp("transfer")
    for lang in ("en", "de"):
        save_task(root / "data", "xnli", lang, sizes=(16, 6, 6))
    model_path = str(tiny_model(root / "model"))
    tokenizer = load_tokenizer(model_path)
    settings = FineTuneSettings(lr=1e-3, batch_size=8, epochs=1, max_length=32, source="test")

    def encode(lang, split):
        examples = read_split(XNLITask, str(root / "data"), lang, split)[0]
        return finetune.compact(XNLITask.encode(examples, tokenizer, settings.max_length))

    data = finetune.TaskData(
        encode("en", "train"), {"en": encode("en", "validation")}, {lang: encode(lang, "test") for lang in ("en", "de")}
    )
    emulation = DeviceEmulation()
    with emulation:
        model = finetune.load_model(model_path, XNLITask).to(EMULATED)
        wrapped = torch.nn.parallel.DistributedDataParallel(model)
        optimizer, schedule = finetune.optimizer_and_schedule(model, settings, 10)
        for step in range(WARMUP_STEPS + 1):
            features = data.train[8 * (step % 2) : 8 * (step % 2) + 8]
            batch = {k: v.to(EMULATED) for k, v in finetune.collate(features, tokenizer.pad_token_id).items()}
            with emulation.counting() as syncs:
                finetune.train_step(XNLITask, wrapped, model, optimizer, schedule, batch)
        job = finetune.FineTuneJob(task="xnli", seed=0, model_path=model_path, settings=settings)
        with emulation.counting() as whole:
            finetune.fine_tune(job, data, tokenizer.pad_token_id, 0, 1, EMULATED)
    return syncs, whole


def test_a_transfer_fine_tuning_step_keeps_host_and_device_apart(transfer):
    step, whole = transfer
    assert step is not None and whole  # fine_tune reads its losses and scores on the host: not budgeted


# ------------------------------------------------------------------------------------------------ table and budget


def sync_table(measure, transfer) -> str:
    rows = []
    for name in sorted(OBJECTIVES):
        measured = measure(name)
        if measured.mix is not None:
            rows.append(f"{name:<16} MIX: {str(measured.mix).splitlines()[0]}")
            continue
        rows.append(f"{name:<16} {len(measured.step):>3} syncs / step")
        rows += [f"{'':<22}{count} x {what}" for what, count in summary(measured.step).items()]
        if measured.evaluation is not None:
            rows.append(f"{name + ' eval':<16} {len(measured.evaluation):>3} syncs / recipe.evaluate()")
            rows += [f"{'':<22}{count} x {what}" for what, count in summary(measured.evaluation).items()]
    step, whole = transfer
    for label, syncs in (("transfer_step", step), ("transfer run", whole)):
        rows.append(
            f"{label:<16} {len(syncs):>3} syncs"
            + (" / step" if label == "transfer_step" else " / fine_tune (1 epoch: 2 steps, dev, test)")
        )
        rows += [f"{'':<22}{count} x {what}" for what, count in summary(syncs).items()]
    return "\n".join(rows)


def test_print_the_sync_table(measure, transfer):
    table = sync_table(measure, transfer)
    print("\nhost syncs on the emulated device (tests/device_emulation.py):\n" + table)  # pytest -s shows it
    if os.environ.get("DISTALIGN_SYNC_TABLE"):
        Path(os.environ["DISTALIGN_SYNC_TABLE"]).write_text(table + "\n")


def test_syncs_per_steady_state_step_stay_within_budget(measure, transfer):
    counts = {name: len(measure(name).step) for name in OBJECTIVES if measure(name).mix is None}
    counts["transfer_step"] = len(transfer[0])
    over = {name: (count, SYNC_BUDGET[name]) for name, count in counts.items() if count > SYNC_BUDGET[name]}
    assert not over, f"host syncs per step over budget (count, budget): {over}"
