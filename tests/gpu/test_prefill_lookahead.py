"""Lookahead for large steps on CUDA (`pytest -m gpu tests/gpu/test_prefill_lookahead.py`): with the
lookahead on (the default) a paged prompt's logits are bitwise resident's, and the quantized grouped kernels read the
lookahead ring only once its copies have landed and the ring is refilled only once it has been read (both checked
with the copy stream, then the compute stream, held back by a spin)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from engine.experts.pager import host_pager as host_pager_module
from engine.experts.pager import lookahead
from engine.experts.providers.paged import PagedExperts
from engine.experts.providers.resident import ResidentExperts
from engine.quant.synthetic import synthetic_quant_experts
from tests.gguf.engine_logits import prefill_logits
from tests.experts.test_prefill_lookahead import before_groups
from tests.quant import test_quant_providers as providers
from tests.tiny_models import VOCAB

pytestmark = pytest.mark.gpu
PROMPT = 256  # x top-2 over 8 experts: 64 entries an expert, past lookahead.MIN_ENTRIES_PER_EXPERT
SPIN_CYCLES = 20_000_000  # ~10 ms at the H200's clock: far longer than any copy or layer here


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


def prompt_logits(folder, token_ids, **options):
    """The prompt's logits twice in one engine (the first fills the slots: only full layers are staged for), and
    the expert counters."""
    from engine.api import Engine, EngineOptions

    with Engine(EngineOptions(model=str(folder), device="cuda", max_model_len=PROMPT + 16, **options)) as engine:
        return [prefill_logits(engine, token_ids) for _ in range(2)], engine.expert_counters()


def test_paged_prompt_logits_are_resident_bits(cuda, tiny_model_dir, monkeypatch):
    folder = tiny_model_dir("qwen3_moe")
    token_ids = np.random.default_rng(5).integers(3, VOCAB, PROMPT).tolist()
    (reference, again), _ = prompt_logits(folder, token_ids, experts="resident")
    assert np.array_equal(again, reference)
    for overlap in ("1", "0"):
        if overlap == "0":  # the lookahead off from here on: no ring rows
            monkeypatch.setattr(host_pager_module, "configured_rows", lambda expert_bytes, device_type: 0)
        for slots in (2, 5):
            runs, counters = prompt_logits(folder, token_ids, experts="paged", expert_slots=slots)
            for got in runs:
                assert np.array_equal(got, reference), (overlap, slots)
            assert (counters.prefetch_used > 0) == (overlap == "1"), (overlap, slots)


def hold_back(pager: PagedExperts, stream: str) -> None:
    """Spin `stream` ("copy" or "compute") before every copy into, or compute from, the lookahead ring."""
    host_pager = pager.host_pager
    copy_engine = host_pager.copies
    copy = copy_engine.copy

    def late_copy(pairs, after=None):
        if after is not None and stream == "copy":  # the ring's copies: the only ones given an event
            with torch.cuda.stream(copy_engine.stream):
                torch.cuda._sleep(SPIN_CYCLES)
        copy(pairs, after)

    def late_compute(layer, table, units):
        if stream == "compute" and table is host_pager.lookahead.ring:
            torch.cuda._sleep(SPIN_CYCLES)

    copy_engine.copy = late_copy
    before_groups(host_pager, late_compute)


@pytest.mark.parametrize("stream", ["copy", "compute"])
@pytest.mark.parametrize("slots", [2, 5])
def test_the_ring_is_read_after_its_copies_and_refilled_after_its_reads(cuda, monkeypatch, slots, stream):
    monkeypatch.setattr(lookahead, "MIN_ENTRIES_PER_EXPERT", 8)  # the steps' 40 tokens stage their next layer
    args = SimpleNamespace(hidden_size=providers.D, moe_intermediate_size=providers.I, num_experts=providers.E)
    expected = providers.outputs(ResidentExperts(synthetic_quant_experts(args, providers.TYPES, cuda, host=False)),
                                 device=cuda)
    host = synthetic_quant_experts(args, providers.TYPES, cuda, host=True)
    pager = PagedExperts(host, cuda, {layer: slots for layer in providers.TYPES})
    pager.host_pager.lookahead.rows = 3
    hold_back(pager, stream)
    for got, want in zip(providers.outputs(pager, device=cuda), expected):
        assert torch.equal(got, want)
    assert pager.counters.prefetch_used > 0
