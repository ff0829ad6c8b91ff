"""A reasoning model as a GGUF file: its harmony vocabulary and chat template come from the file's metadata,
and both engines (llama.cpp, Wisp's own) split the reasoning from the answer. Sampling follows a script of token
ids, as in tests/generation/test_reasoning_engine.py."""

from __future__ import annotations

import pytest
import torch

import engine.backends.llama_cpp_core as llama_cpp_core
import engine.runtime.llm_engine as llm_engine
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.gguf.convert import convert
from engine.text.tokenizer import Tokenizer
from tests.generation.reasoning_fixtures import HARMONY_TOKENS, write_reasoning_model

REPLY = "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final<|message|>Done.<|call|>"
REQUEST = GenerateRequest(messages=({"role": "user", "content": "Hi"},), sampling=SamplingParams(max_tokens=100))


@pytest.fixture(scope="module")
def harmony_gguf(tmp_path_factory):
    folder = write_reasoning_model(tmp_path_factory.mktemp("harmony_gguf"), "harmony")
    tokenizer = Tokenizer.from_folder(folder)
    reply, tail = (tokenizer.encode(text, add_special_tokens=False) for text in (REPLY, "tail"))
    return convert(folder, folder / "harmony-f32.gguf", "f32").path, reply, tail


@pytest.mark.parametrize("backend", ["llama.cpp", "wisp"])
def test_both_engines_split_a_gguf_reasoning_model(harmony_gguf, backend, monkeypatch):
    path, reply, tail = harmony_gguf
    tokens = iter(reply + tail)
    monkeypatch.setattr(llama_cpp_core, "sample", lambda logits, params, generator, *context: (next(tokens), -1.0))
    monkeypatch.setattr(llm_engine, "sample_tensors", lambda logits, params, generators, *contexts: (
        torch.tensor([next(tokens)]), torch.tensor([-1.0])))
    with Engine(EngineOptions(model=str(path), device="cpu", backend=backend)) as engine:
        assert engine.info.reasoning_effort and not engine.info.thinking_switch  # from the file's chat template
        finish = engine.generate(REQUEST)
    assert (finish.reason, finish.text, finish.reasoning) == ("stop", "Done.", "Think.")
    assert list(finish.token_ids) == reply  # <|call|> ended it


def test_the_harmony_vocabulary_ends_and_renders_as_llama_cpp_has_it(harmony_gguf):
    """<|end|> closes the analysis message without ending the reply; the framing tokens are text, not control."""
    import llama_cpp

    from engine.gguf.reader import GgufFile
    from engine.gguf.tokenizer import gguf_tokenizer
    from tests.gguf.models import _vocab_only, llama_cpp_end_of_generation

    path = harmony_gguf[0]
    tokenizer = gguf_tokenizer(GgufFile(path))
    vocab = llama_cpp.llama_model_get_vocab(_vocab_only(path)._model.model)
    control = {i for i in range(tokenizer.vocab_size) if llama_cpp.llama_vocab_is_control(vocab, i)}
    harmony_ids = {tokenizer.token_to_id(text) for text in HARMONY_TOKENS}
    assert tokenizer.eos_token_ids & harmony_ids == llama_cpp_end_of_generation(path) & harmony_ids
    assert {tokenizer.token_to_id(text) for text in ("<|return|>", "<|call|>")} <= tokenizer.eos_token_ids
    assert tokenizer.token_to_id("<|end|>") not in tokenizer.eos_token_ids
    assert tokenizer.special_token_ids & harmony_ids == control & harmony_ids
