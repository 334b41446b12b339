"""A worker's streams fetch their first batch while the model loads (``distalign.train.loop.FirstBatchAhead``)."""

import threading

import pytest

from distalign.train.loop import FirstBatchAhead


class CountingBatches:
    """Batches 0, 1, 2, ...; records the thread that asked for each; its state: the next batch."""

    def __init__(self, fail_first: bool = False):
        self.given, self.threads, self.fail_first = 0, [], fail_first
        self.first_asked = threading.Event()

    def __next__(self):
        self.threads.append(threading.current_thread())
        self.first_asked.set()
        if self.fail_first:
            raise OSError("the first batch's task failed")
        self.given += 1
        return {"batch": self.given - 1}

    def state(self) -> dict:
        return {"next": self.given}


def test_the_first_batch_is_asked_for_on_a_thread_before_the_loop_wants_it():
    batches = CountingBatches()
    ahead = FirstBatchAhead(batches)
    assert batches.first_asked.wait(10), "the first batch was not fetched until asked for"
    assert batches.threads[0] is not threading.main_thread()
    assert [next(ahead)["batch"] for _ in range(3)] == [0, 1, 2]  # in order, none lost or repeated
    assert batches.threads[1:] == [threading.main_thread()] * 2
    assert ahead.state() == {"next": 3}


def test_an_error_fetching_the_first_batch_is_raised_at_the_loops_first_batch():
    ahead = FirstBatchAhead(CountingBatches(fail_first=True))
    with pytest.raises(OSError, match="the first batch's task failed"):
        next(ahead)
