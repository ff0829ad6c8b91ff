"""A prompt's misses read in place from the host store (engine.experts.host_pager, UVA on CUDA) give the resident
tokens and logprobs bit for bit, on the CPU where the "device view" is the host tensor itself."""

from __future__ import annotations

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.experts import dispatch, host_pager
from engine.model.loader import read_args

PROMPT = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\nclass Stack:\n    def push(self, x):"
GREEDY = SamplingParams(max_tokens=12, ignore_eos=True)


def generate(folder, **options):
    with Engine(EngineOptions(model=str(folder), device="cpu", **options)) as engine:
        result = engine.generate(GenerateRequest(prompt=PROMPT, sampling=GREEDY))
    assert result.error is None, result.error
    return result.token_ids, result.logprobs


def test_misses_read_in_place_give_the_resident_bits(tiny_model_dir, monkeypatch):
    folder = tiny_model_dir("qwen3_moe")
    args = read_args(folder)
    monkeypatch.setattr(dispatch, "GATHER_LIMIT_BYTES", 3 * args.expert_numel * 4)  # the prompt: large steps
    reference = generate(folder, experts="resident")
    reads = []
    original = host_pager.HostPager._read_in_place

    def counting(self, layer, experts, *rest):
        reads.append(len(experts))
        return original(self, layer, experts, *rest)

    monkeypatch.setattr(host_pager, "can_read_in_place", lambda device, host: True)
    monkeypatch.setattr(host_pager.HostPager, "_read_in_place", counting)
    got = generate(folder, experts="paged", expert_slots=args.num_experts_per_tok)
    assert got == reference
    assert sum(reads) > 0  # the prompt's misses did take the in-place path
