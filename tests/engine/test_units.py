"""One way to show a size, everywhere: MiB under 1 GiB, else GiB, one decimal (KiB and bytes below that)."""

import pytest

from engine.units import format_bytes, parse_size

MiB, GiB = 1024**2, 1024**3


@pytest.mark.parametrize("num_bytes, text", [
    (0, "0 B"), (1023, "1023 B"), (300 * 1024, "300.0 KiB"), (690.6 * MiB, "690.6 MiB"), (GiB - MiB, "1023.0 MiB"),
    (GiB, "1.0 GiB"), (24 * GiB, "24.0 GiB"), (1536 * GiB, "1536.0 GiB"),
])
def test_sizes_are_shown_by_one_rule(num_bytes, text):
    assert format_bytes(num_bytes) == text


def test_a_shown_size_reads_back_to_within_its_rounding():
    for num_bytes in (300 * 1024, 724_180_000, 5 * GiB + 123_456_789):
        assert abs(parse_size(format_bytes(num_bytes)) - num_bytes) <= 0.05 * num_bytes / 10
