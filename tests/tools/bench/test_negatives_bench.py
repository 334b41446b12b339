"""The per-rank InfoNCE memory bench: its trace holds what a real computation holds, and it shows the split's
memory linear in W (and the gather-everything baseline's quadratic)."""

import pytest
import torch

from distalign.tools.bench.negatives import main, rank_peak_bytes

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed.nn.functional.all_gather is deprecated")


@pytest.mark.parametrize("contrast", ["before", "after"])
def test_the_fake_trace_counts_what_real_tensors_hold(contrast):
    for dtype in (torch.float32, torch.bfloat16):
        assert rank_peak_bytes(4, 6, 16, contrast, dtype) == rank_peak_bytes(4, 6, 16, contrast, dtype, fake=False)


def test_split_memory_grows_linearly_in_w_and_the_baseline_s_quadratically():
    peaks = {contrast: [rank_peak_bytes(w, 8, 64, contrast) for w in (8, 16, 32)] for contrast in ("before", "after")}
    for smaller, larger in zip(peaks["after"], peaks["after"][1:]):
        assert 1.9 < larger / smaller < 2.1
    for smaller, larger in zip(peaks["before"], peaks["before"][1:]):
        assert larger / smaller > 3.3
    assert peaks["after"][-1] * 5 < peaks["before"][-1]


def test_command_prints_the_table_with_the_slopes(capsys):
    main(["--worlds", "2,4", "--pairs", "4", "--dim", "8"])
    out = capsys.readouterr().out
    assert out.count("\n| ") == 2 and "before k = " in out and "after k = " in out  # a row per W, the slopes
