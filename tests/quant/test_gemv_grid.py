"""The GEMVs put a matrix's row blocks on a grid's second axis, which CUDA caps at 65,535 programs: a split that
would launch more is not picked (an lm_head of 151,936 or 248,320 rows), and the kernel chosen instead stays within
the cap."""

import pytest

from engine.quant import linear
from engine.quant.linear import MAX_GRID_ROWS, QuantLinearSpec, _cdiv, any_word_split, wide_split, word_split
from engine.quant.types import quant_type


@pytest.mark.parametrize("qtype", ["Q4_K", "Q6_K", "Q8_0"])
@pytest.mark.parametrize("rows", [2048, 151936, 248320, 300000])
def test_no_split_launches_more_programs_than_the_grid_allows(qtype, rows):
    spec = QuantLinearSpec(quant_type(qtype), rows, 2048)
    for split in (wide_split(spec), word_split(spec)):
        assert split is None or _cdiv(rows, split[0]) <= MAX_GRID_ROWS


def test_the_expert_and_attention_shapes_keep_their_splits():
    assert wide_split(QuantLinearSpec(quant_type("Q4_K"), 1536, 2048)) is not None
    assert wide_split(QuantLinearSpec(quant_type("Q4_K"), 4096, 2048)) is not None
    assert wide_split(QuantLinearSpec(quant_type("Q6_K"), 2048, 768)) is not None


def test_an_lm_head_leaves_the_two_row_splits(monkeypatch):
    monkeypatch.setattr(linear, "GEMV", "wide")
    lm_head = QuantLinearSpec(quant_type("Q6_K"), 151936, 2048)
    assert wide_split(lm_head) is None  # two rows a program: 75,968 programs
    assert word_split(lm_head) == (4, 1, 1)  # four: 37,984
    assert _cdiv(lm_head.out_features, any_word_split(lm_head)[0]) <= MAX_GRID_ROWS
