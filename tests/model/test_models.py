"""One runner for every architecture: tiny random checkpoints written by transformers, loaded from disk by Wisp."""

from __future__ import annotations

import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.experts.providers.resident import ResidentExperts
from engine.model.attention import AttentionMetadata, SeqSpan
from engine.model.latent_cache import new_kv_cache
from engine.model.loader import load_weights
from engine.model.transformer import MoeContext
from engine.text.tokenizer import Tokenizer

PROMPTS = ["def fib(n):", "The quick brown fox", "class Stack:\n    def", "héllo wörld 你好"]


def hf_reference(folder, dtype: torch.dtype = torch.float32):
    """transformers' causal LM, or its vision-language model where it has no causal LM for the config (qwen3_vl_moe)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    try:
        return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    except ValueError:
        return AutoModelForImageTextToText.from_pretrained(folder, dtype=dtype).eval()


def prompt_logits(folder, ids: list[int]) -> torch.Tensor:
    """All-position logits from Wisp's model in one prefill."""
    weights = load_weights(folder, torch.device("cpu"), "float32")
    args = weights.args
    cache = new_kv_cache(args, 64, torch.float32, "cpu")
    n = len(ids)
    meta = AttentionMetadata(slot_mapping=torch.arange(n), spans=[SeqSpan(0, n, torch.arange(n))])
    with torch.inference_mode():
        hidden = weights.model(torch.tensor(ids), torch.arange(n), meta, cache, MoeContext(ResidentExperts(weights.store)))
        return weights.model.logits(hidden)


def greedy(max_tokens=32, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, ignore_eos=True, **kw)


def test_prompt_logits_match_transformers(tiny_model_dir, model_type):
    folder = tiny_model_dir(model_type)
    ids = Tokenizer.from_folder(folder).encode(PROMPTS[0] + " " + PROMPTS[1])
    ours = prompt_logits(folder, ids)
    with torch.inference_mode():
        ref = hf_reference(folder)(torch.tensor([ids])).logits[0].float()
    assert ours.shape == ref.shape
    assert (ours - ref).abs().max().item() < 1e-4


def test_greedy_tokens_match_transformers_generate(tiny_model_dir, model_type):
    folder = tiny_model_dir(model_type)
    with Engine(EngineOptions(model=str(folder), device="cpu")) as engine:
        ids = engine._core.tokenizer.encode(PROMPTS[0])
        result = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=greedy()))
    with torch.inference_mode():
        out = hf_reference(folder).generate(torch.tensor([ids]), max_new_tokens=32, min_new_tokens=32,
                                            do_sample=False, eos_token_id=None, pad_token_id=0)
    assert list(result.token_ids) == out[0, len(ids):].tolist()
    assert len(result.logprobs) == 32 and all(lp <= 0 for lp in result.logprobs)


def alone_and_together(folder, prompts, sampling: SamplingParams) -> tuple[list, list]:
    """Each prompt's greedy tokens run by itself, then all of them submitted at once (continuous batching)."""
    with Engine(EngineOptions(model=str(folder), device="cpu")) as engine:
        alone = [engine.generate(GenerateRequest(prompt=p, sampling=sampling)).token_ids for p in prompts]
        handles = [engine.submit(GenerateRequest(prompt=p, sampling=sampling)) for p in prompts]
        return alone, [h.result().token_ids for h in handles]


def test_batched_decoding_equals_each_alone(tiny_model_dir, model_type):
    alone, together = alone_and_together(tiny_model_dir(model_type), PROMPTS, greedy(24))
    assert together == alone


def test_chat_prompt_renders_like_transformers(tiny_model_dir):
    from transformers import AutoTokenizer

    folder = tiny_model_dir("qwen3_moe")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "def fib(n):"}]
    ours = Tokenizer.from_folder(folder).encode_chat(messages, add_generation_prompt=True)
    ref = AutoTokenizer.from_pretrained(folder).apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    ref = ref["input_ids"] if isinstance(ref, dict) or hasattr(ref, "keys") else ref
    assert ours == list(ref)
