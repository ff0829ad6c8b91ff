"""`wisp convert-gguf`: every model_type it converts becomes a GGUF that llama.cpp runs token for token like Wisp."""

import json

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.gguf.info import read_info
from engine.cli import main
from engine.errors import ModelFormatError, UnsupportedModelError
from engine.gguf.convert import convert
from engine.loading.model_path import DEMO_MODEL
from tests.tiny_glm4_moe import randomize_correction_bias
from tests.tiny_models import GGUF_MODEL_TYPES, HYBRID_TYPES, hf_model, save_tokenizer

DEMO_BYTES = {"f32": 65_293_792, "f16": 32_787_936, "bf16": 32_787_936, "q8_0": 17_550_816}


def write_tiny(folder, model_type):
    """tests/tiny_models' checkpoints; OLMoE with as many KV heads as heads, the only layout llama.cpp's olmoe runs;
    gpt_oss with llama.cpp's SwiGLU limit; glm4_moe with ungrouped routing, as GLM-4.5 and llama.cpp's graph have it."""
    torch.manual_seed(0)
    model = hf_model(model_type, **({"n_group": 1, "topk_group": 1} if model_type == "glm4_moe" else {}))
    randomize_correction_bias(model)
    if model_type == "olmoe":
        from transformers import OlmoeForCausalLM

        model.config.num_key_value_heads = model.config.num_attention_heads
        model = OlmoeForCausalLM(model.config)
    if model_type == "gpt_oss":  # llama.cpp's graph fixes the SwiGLU limit at 7
        model.config.swiglu_limit = 7.0
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" not in name:
                param.normal_(0.0, 0.15)
    model.save_pretrained(folder)
    save_tokenizer(folder)
    return folder


def greedy_tokens(model: str, max_tokens: int = 16) -> tuple[int, ...]:
    request = GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=max_tokens, ignore_eos=True))
    backend = "llama.cpp" if model.endswith(".gguf") else "auto"  # the converted file as llama.cpp runs it
    with Engine(EngineOptions(model=model, device="cpu", backend=backend)) as engine:
        return engine.generate(request).token_ids


@pytest.mark.parametrize("model_type", [*GGUF_MODEL_TYPES, "gpt_oss", *HYBRID_TYPES])
def test_every_model_type_converts_and_generates_the_same_tokens(model_type, tmp_path):
    folder = write_tiny(tmp_path / model_type, model_type)
    gguf_path = convert(folder, tmp_path / f"{model_type}.gguf", "f32").path
    assert greedy_tokens(str(gguf_path)) == greedy_tokens(str(folder))


def test_the_demo_twin_keeps_the_models_shape_and_chat_template(demo_gguf):
    info = read_info(demo_gguf)
    template = (DEMO_MODEL / "chat_template.jinja").read_text()
    assert (info.architecture, info.num_layers, info.num_experts, info.top_k) == ("qwen3moe", 8, 16, 4)
    assert info.context_length == 2048 and info.chat_templates == {"default": template}
    assert info.expert_bytes == 3 * 256 * 128 * 4 and info.num_moe_layers == 8


@pytest.mark.parametrize("out_type", ["f16", "bf16", "q8_0"])
def test_smaller_types_have_their_size_and_still_answer(out_type, tmp_path, capsys):
    out = tmp_path / f"demo-{out_type}.gguf"
    assert main(["convert-gguf", str(DEMO_MODEL), str(out), "--type", out_type]) == 0
    assert out.stat().st_size == DEMO_BYTES[out_type] and read_info(out).file_type == out_type
    capsys.readouterr()
    assert main(["run", str(out), "--prompt", "def fib(n):", "--max-tokens", "8", "--device", "cpu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["token_ids"][:1] == [268]  # the demo's confident first token


def test_a_checkpoint_llama_cpp_would_compute_differently_is_refused(tmp_path):
    folder = write_tiny(tmp_path / "qwen3", "qwen3_moe")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "norm_topk_prob": False}))
    with pytest.raises(UnsupportedModelError, match="renormalises the top-k"):
        convert(folder, tmp_path / "x.gguf")
    assert not (tmp_path / "x.gguf").exists() and not list(tmp_path.glob("*.partial"))


def test_a_tokenizer_llama_cpp_does_not_know_is_refused(tmp_path):
    folder = write_tiny(tmp_path / "qwen3", "qwen3_moe")
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    tokenizer["pre_tokenizer"] = {"type": "Whitespace"}
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer))
    with pytest.raises(UnsupportedModelError, match="pre-tokenizer"):
        convert(folder, tmp_path / "x.gguf")


def test_an_unwritable_output_names_it_and_leaves_nothing(tmp_path):
    (tmp_path / "taken").write_text("a file where the output's folder would be")
    out = tmp_path / "taken" / "demo.gguf"
    with pytest.raises(ModelFormatError, match="demo.gguf: cannot write it"):
        convert(DEMO_MODEL, out, "f32")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert main(["convert-gguf", str(tmp_path), str(tmp_path / "x.gguf")]) == 2
    assert "config.json" in capsys.readouterr().err
