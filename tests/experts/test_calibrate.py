"""The link probe stays inside the memory it is given: it runs after a loaded engine's pool is allocated, in the
plan's idle workspace, so the budget stays a hard limit on a first run (no cached probe yet)."""

from engine.experts.pager.calibrate import PROBE_BYTES, measure, probe_shape


def test_the_probe_fits_the_bytes_it_is_given():
    assert probe_shape(None) == (32, PROBE_BYTES)
    for limit in (5000, 1 << 20, 50 << 20, 400 << 20):
        count, size = probe_shape(limit)
        assert 1 <= count <= 32 and count * size <= limit


def test_a_small_probe_still_measures_a_rate():
    import torch

    rate, per_copy = measure(torch.device("cpu"), *probe_shape(1 << 20))
    assert rate > 0 and per_copy >= 0
