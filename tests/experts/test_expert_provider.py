"""The ExpertProvider contract: every provider implements all of it, and routing listeners hear the same
layer-steps whichever provider runs them (graphed decode steps included, in step order)."""

from __future__ import annotations

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.experts.pager.device_pager import DevicePager
from engine.experts.providers.paged import PagedExperts
from engine.experts.provider import ExpertProvider, GraphedExperts
from engine.experts.providers.resident import ResidentExperts, ResidentGraphed
from engine.experts.providers.static import StaticOffloadExperts
from engine.experts.providers.touched_copy import TouchedCopyExperts, TouchedCopyGraphed
from engine.model.loader import read_args

SAMPLING = SamplingParams(max_tokens=6, ignore_eos=True)


def protocol_methods(protocol) -> set[str]:
    return {name for klass in protocol.__mro__ if klass.__module__ == protocol.__module__
            for name, value in vars(klass).items() if callable(value) or isinstance(value, property)} - {
        "__init__", "__subclasshook__", "__init_subclass__", "_proto_hook"}


@pytest.mark.parametrize("protocol, classes", [
    (ExpertProvider, [ResidentExperts, StaticOffloadExperts, TouchedCopyExperts, PagedExperts]),
    (GraphedExperts, [ResidentGraphed, TouchedCopyGraphed, DevicePager]),
])
def test_every_provider_implements_the_whole_contract(protocol, classes):
    members = protocol_methods(protocol)
    assert {"forward", "begin_step"} <= members
    for klass in classes:
        assert protocol in klass.__mro__  # implemented explicitly, not by matching names
        missing = [name for name in members if getattr(klass, name) is getattr(protocol, name)]
        assert not missing, f"{klass.__name__} inherits {missing} from the protocol"


def heard(folder, whole_step: bool, **options) -> list[tuple]:
    from engine.runtime.decode_graphs import WholeStepOptions

    decode = dict(decode="static") if whole_step else {}
    steps = []
    with Engine(EngineOptions(model=str(folder), device="cpu", max_model_len=128, **decode, **options)) as engine:
        engine._core.runner.experts.add_routing_listener(lambda *step: steps.append(step))
        if whole_step:
            engine._core.runner.padded_decode.set_whole_options(WholeStepOptions(eager=True))
        for prompt in ("def fib(n):", "The quick brown fox"):
            engine.generate(GenerateRequest(prompt=prompt, sampling=SAMPLING))
        engine._on_engine_thread(engine._core.runner.experts.settle)
    return steps


def test_routing_listeners_hear_the_same_steps_from_every_provider(tiny_model_dir):
    pytest.importorskip("triton", reason="the device pager's kernels need Triton")  # installed by the test extra
    folder = tiny_model_dir("qwen3_moe")
    args = read_args(folder)
    reference = heard(folder, False, experts="resident")
    decode_steps = sum(is_decode for _, _, is_decode in reference)
    assert decode_steps == 2 * (SAMPLING.max_tokens - 1) * sum(args.moe_layers)
    for whole_step, options in [(False, dict(experts="static")),
                                (False, dict(experts="paged", expert_slots=args.num_experts_per_tok)),
                                (True, dict(experts="resident")),
                                (True, dict(experts="paged", expert_slots=2 * args.num_experts_per_tok))]:
        assert heard(folder, whole_step, **options) == reference, (whole_step, options)
