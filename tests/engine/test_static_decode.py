"""Static-shape decode (the path CUDA graphs capture), run eagerly on the CPU: same tokens as the dynamic path,
and bitwise identical across expert modes."""

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model.loader import read_args
from tests.engine.test_expert_modes import PROMPTS, mode_options

SAMPLING = SamplingParams(max_tokens=16, ignore_eos=True)


def run_all(folder, **options):
    with Engine(EngineOptions(model=str(folder), device="cpu", max_model_len=128, **options)) as engine:
        single = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SAMPLING))
        batch = [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=SAMPLING) for p in PROMPTS])]
    return [(r.token_ids, r.logprobs) for r in [single, *batch]]


def test_static_decode_matches_dynamic_tokens(tiny_model_dir, model_type):
    folder = tiny_model_dir(model_type)
    static, dynamic = run_all(folder, decode="static"), run_all(folder, decode="dynamic")
    assert [tokens for tokens, _ in static] == [tokens for tokens, _ in dynamic]
    for (_, a), (_, b) in zip(static, dynamic):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-4


def test_static_decode_is_bitwise_equal_across_expert_modes(tiny_model_dir):
    folder = tiny_model_dir("qwen2_moe")
    args = read_args(folder)
    reference = run_all(folder, decode="static")
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert run_all(folder, decode="static", **options) == reference, name
