"""Fill-in-the-middle through the engine API: GenerateRequest(prompt=before, suffix=after) on a model whose tokenizer
has FIM tokens is the prefix-suffix-middle prompt; ModelInfo says whether a model has them; one without refuses."""

from __future__ import annotations

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.errors import RequestError
from tests.text.tokenizer_fixtures import save_hf_folder, train_byte_level_tokenizer
from tests.tiny_models import write_tiny_model

FIM = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"]
GREEDY = SamplingParams(max_tokens=8, ignore_eos=True)


@pytest.fixture(scope="module")
def fim_model(tmp_path_factory):
    folder = write_tiny_model(tmp_path_factory.mktemp("fim_model"), "qwen3_moe")
    backend = train_byte_level_tokenizer(300)
    backend.add_special_tokens(FIM)
    return save_hf_folder(folder, backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")


def test_suffix_makes_the_prefix_suffix_middle_prompt(fim_model):
    with Engine(EngineOptions(model=str(fim_model), device="cpu")) as engine:
        assert engine.info.fill_in_middle
        tokenizer = engine._core.tokenizer
        ids = [tokenizer.token_to_id(FIM[0]), *tokenizer.encode("def add(a, b):\n    return ", add_special_tokens=False),
               tokenizer.token_to_id(FIM[1]), *tokenizer.encode("\n\nprint(add(1, 2))", add_special_tokens=False),
               tokenizer.token_to_id(FIM[2])]
        filled = engine.generate(GenerateRequest(prompt="def add(a, b):\n    return ", suffix="\n\nprint(add(1, 2))",
                                                 sampling=GREEDY))
        direct = engine.generate(GenerateRequest(prompt_token_ids=tuple(ids), sampling=GREEDY))
    assert filled.error is None and filled.token_ids == direct.token_ids
    assert filled.stats.prompt_tokens == len(ids)


def test_a_model_without_fim_tokens_says_so(tiny_model_dir):
    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu")) as engine:
        assert not engine.info.fill_in_middle
        finish = engine.generate(GenerateRequest(prompt="def f(", suffix=")", sampling=GREEDY))
    assert finish.reason == "error" and "fill-in-the-middle" in finish.error


def test_suffix_goes_with_a_raw_prompt_only():
    with pytest.raises(RequestError) as excinfo:
        GenerateRequest(messages=({"role": "user", "content": "hi"},), suffix="x")
    assert excinfo.value.field == "suffix"
