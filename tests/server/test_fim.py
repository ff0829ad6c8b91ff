"""Fill-in-the-middle prompts for models whose tokenizer has FIM tokens (prefix-suffix-middle order)."""

import pytest
from tokenizers import Tokenizer as Backend, models, pre_tokenizers

from engine.server.api_errors import ApiError
from engine.server.served_model import ServedModel
from engine.text.tokenizer import Tokenizer


def tokenizer(specials: list[str]) -> Tokenizer:
    backend = Backend(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.add_special_tokens(specials)
    return Tokenizer(backend)


def test_qwen_style_fim_prompt():
    served = ServedModel("m", 64, tokenizer(["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"]))
    assert served.fim_prompt_ids("a b", "b") == (3, 0, 1, 4, 1, 5)


def test_starcoder_style_fim_prompt():
    served = ServedModel("m", 64, tokenizer(["<fim_prefix>", "<fim_middle>", "<fim_suffix>"]))
    assert served.fim_prompt_ids("a", "b") == (3, 0, 5, 1, 4)


def test_no_fim_tokens_is_a_400_that_says_so():
    with pytest.raises(ApiError, match="fill-in-the-middle") as excinfo:
        ServedModel("m", 64, tokenizer(["<|im_start|>"])).fim_prompt_ids("a", "b")
    assert excinfo.value.status == 400 and excinfo.value.param == "suffix"


def write_fim_model(folder):
    """A tiny random qwen3_moe whose tokenizer has Qwen's FIM tokens."""
    import torch
    from tokenizers import decoders, trainers
    from transformers import PreTrainedTokenizerFast

    from tests.tiny_models import CHAT_TEMPLATE, CORPUS, SPECIALS, VOCAB, hf_model

    torch.manual_seed(0)
    hf_model("qwen3_moe").save_pretrained(folder)
    backend = Backend(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=SPECIALS + list(FIM_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    backend.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    return folder


FIM_TOKENS = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>")


def test_completion_with_suffix_on_a_fim_model(tmp_path):
    import openai

    from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
    from engine.server import start_server

    folder = write_fim_model(tmp_path)
    with Engine(EngineOptions(model=str(folder), device="cpu")) as engine:
        handle = start_server(engine, "127.0.0.1", 0)
        try:
            client = openai.OpenAI(base_url=handle.url, api_key="unused", max_retries=0)
            answer = client.completions.create(model=folder.name, prompt="def fib(n):\n", suffix="\n    return n\n",
                                               max_tokens=6, temperature=0)
        finally:
            handle.stop()
        tok = Tokenizer.from_folder(folder)
        fim = [tok.token_to_id(token) for token in FIM_TOKENS]
        ids = (fim[0], *tok.encode("def fib(n):\n", False), fim[1], *tok.encode("\n    return n\n", False), fim[2])
        local = engine.generate(GenerateRequest(prompt_token_ids=ids, sampling=SamplingParams(max_tokens=6)))
    assert answer.usage.prompt_tokens == len(ids)
    assert answer.choices[0].text == local.text
