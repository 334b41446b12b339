"""Table streams drawn by the workers themselves (``distalign.preparation.table_rows``): a table written once to
the run's storage (local or S3) and read back by row; every worker's batches at global positions, so a resume on
another number of workers trains every position once; the schedule kept from the first start on any W."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from conftest import QUICKSTART, SMALL

from distalign.checkpoint import STATE_FILE
from distalign.config import load_config
from distalign.preparation.inputs import prepare_data
from distalign.preparation.ray_streams import local_streams
from distalign.preparation.resume_checks import kept_schedule
from distalign.preparation.schedule import run_schedule
from distalign.preparation.table_rows import MappedTable, store_table
from distalign.storage import run_location


@pytest.fixture(scope="module")
def world(distalign_home):
    config = load_config(QUICKSTART, SMALL + ["run.name=table-rows"])
    return config, prepare_data(config)


def trained_positions(batches: list[dict]) -> list[int]:
    return [
        epoch * ROWS[0] + row for batch in batches for epoch, row in zip(batch["epoch"].tolist(), batch["row"].tolist())
    ]


ROWS: list[int] = [0]  # the constraint table's rows, set by the test that uses it


def test_a_resume_on_another_worker_count_trains_every_position_once(world):
    config, prepared = world
    ROWS[0] = rows = len(prepared.constraints)
    batch_size = config.train.constraint_batch_size
    four = [local_streams(prepared, config, rank=rank, workers=4)["constraints"] for rank in range(4)]
    steps = rows // (4 * batch_size) + 1  # past the end of epoch 0
    before = [next(stream) for _ in range(steps) for stream in four]
    saved = {"constraints": [stream.state() for stream in four]}
    assert {state["position"] for state in saved["constraints"]} == {steps * 4 * batch_size}  # the same on every rank

    three = [local_streams(prepared, config, saved, rank=rank, workers=3)["constraints"] for rank in range(3)]
    after = [next(stream) for _ in range(steps) for stream in three]
    positions = trained_positions(before + after)
    assert sorted(positions) == list(range(steps * 7 * batch_size))  # each once, none skipped, across the epochs
    assert {e for batch in before for e in batch["epoch"].tolist()} == {0, 1}
    # the row at a position is the same whichever worker count draws it: rank 0 of one worker reads them all
    alone = local_streams(prepared, config, rank=0, workers=1)["constraints"]
    reference = {}
    for batch in (next(alone) for _ in range(steps * 7)):
        for epoch, row, synset in zip(batch["epoch"].tolist(), batch["row"].tolist(), batch["synset"].tolist()):
            reference[epoch * rows + row] = synset
    drawn = {
        epoch * rows + row: synset
        for batch in before + after
        for epoch, row, synset in zip(batch["epoch"].tolist(), batch["row"].tolist(), batch["synset"].tolist())
    }
    assert drawn == reference


def test_a_checkpoint_of_counted_batches_resumes_at_as_many_rows(world):
    """A checkpoint written before global positions (each worker's batch count) resumes after W·B rows a batch."""
    config, prepared = world
    stream = local_streams(prepared, config, {"constraints": [{"batches": 3}, {"batches": 3}]}, rank=1, workers=2)[
        "constraints"
    ]
    assert stream.state() == {"position": 3 * 2 * config.train.constraint_batch_size}


def test_a_mapped_table_takes_rows_across_record_batches_as_arrow_does(tmp_path):
    table = pa.table({"word": [f"w{i}" for i in range(1000)], "row": np.arange(1000)})
    mapped = MappedTable(table.to_batches(max_chunksize=64), table.schema)
    indices = np.random.default_rng(0).integers(0, 1000, 300)
    assert mapped.take(indices).equals(table.take(indices))
    assert len(mapped.take(np.array([], dtype=np.int64))) == 0


def stored_round_trip(storage: str, endpoint: str) -> None:
    table = pa.table({"word": [f"w{i}" for i in range(200_000)], "row": np.arange(200_000)})
    stored = store_table(table, storage, endpoint, "run", "constraints")
    assert stored.rows == len(table) and stored.uri.startswith(storage.split("://")[0])
    fs, root, _ = run_location(storage, endpoint, "run")
    written = fs.get_file_info(f"{stored.uri.split('://')[-1]}/table.arrow")
    again = store_table(table, storage, endpoint, "run", "constraints")  # a restart: the same contents
    assert again == stored and fs.get_file_info(written.path).mtime_ns == written.mtime_ns  # not written again
    other = store_table(table.slice(1), storage, endpoint, "run", "constraints")
    assert other.uri != stored.uri  # other contents, another file
    opened = stored.open()
    assert len(opened.batches) > 1  # record batches, taken from without concatenating them
    indices = np.array([199_999, 3, 70_000, 3])
    assert opened.take(indices).equals(table.take(indices))


def test_a_table_is_stored_once_and_read_back_by_row_locally(tmp_path):
    stored_round_trip(str(tmp_path / "storage"), "")


def test_a_table_is_stored_once_and_read_back_by_row_on_s3(s3_endpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("DISTALIGN_CACHE", str(tmp_path / "cache"))  # the node's copy
    stored_round_trip("s3://ckpt/tables-test", s3_endpoint[0])


def test_a_resume_keeps_the_first_starts_schedule_on_another_worker_count(world, tmp_path):
    config, prepared = world
    base = SMALL + ["run.name=kept-schedule", f"storage.path={tmp_path}", "train.epochs=2", "eval.every_epochs=1"]
    on_two = load_config(QUICKSTART, base + ["train.num_workers=2"])
    on_four = load_config(QUICKSTART, base + ["train.num_workers=4"])
    first = kept_schedule(on_two, run_schedule(on_two, prepared))
    assert first == run_schedule(on_two, prepared) != run_schedule(on_four, prepared)  # epochs count W's steps
    assert kept_schedule(on_four, run_schedule(on_four, prepared)) == run_schedule(on_four, prepared)  # no checkpoint
    first = kept_schedule(on_two, run_schedule(on_two, prepared))
    checkpoint = tmp_path / "kept-schedule" / "checkpoint_000001"
    checkpoint.mkdir()
    (checkpoint / STATE_FILE).write_text("{}")
    assert kept_schedule(on_four, run_schedule(on_four, prepared)) == first  # the resume keeps it
    longer = load_config(QUICKSTART, base + ["train.num_workers=4", "train.epochs=3"])
    assert kept_schedule(longer, run_schedule(longer, prepared)) == run_schedule(longer, prepared)  # asked anew
