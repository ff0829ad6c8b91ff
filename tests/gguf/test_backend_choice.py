"""`--backend auto|wisp|llama.cpp`: auto runs a GGUF on Wisp's engine when it supports the architecture and every
tensor's quant type, on llama.cpp otherwise, and says why; an explicit choice is honoured or refused by name."""

import pytest

from engine.config import EngineOptions
from engine.errors import ModelFormatError, RequestError, UnsupportedModelError
from engine.gguf.backend_choice import choose_backend


@pytest.mark.parametrize("ftype", ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0"])
def test_auto_picks_wisp_for_the_types_it_runs(ftype, gguf_files):
    choice = choose_backend(gguf_files.quantized("qwen2_moe", ftype), "auto")
    assert choice.backend == "wisp" and "qwen2moe" in choice.reason
    assert choose_backend(gguf_files.quantized("qwen2_moe", ftype), "wisp") == choice


def test_auto_sends_other_quant_types_to_llama_cpp_with_the_reason(gguf_files):
    path = gguf_files.quantized("qwen2_moe", "TQ1_0")
    choice = choose_backend(path, "auto")
    assert choice.backend == "llama.cpp" and "TQ1_0" in choice.reason
    with pytest.raises(UnsupportedModelError, match="TQ1_0.*--backend llama.cpp"):
        choose_backend(path, "wisp")
    assert choose_backend(path, "llama.cpp").backend == "llama.cpp"


def test_f16_and_f32_files_run_on_wisp(gguf_files):
    for out_type in ("f32", "f16"):
        assert choose_backend(str(gguf_files.converted("olmoe", out_type))).backend == "wisp"


def test_folders_run_on_wisp_and_llama_cpp_only_takes_gguf(gguf_files):
    folder = gguf_files.folder("olmoe")
    assert choose_backend(folder, "auto").backend == choose_backend(None, "wisp").backend == "wisp"
    with pytest.raises(RequestError, match="--backend llama.cpp runs .gguf files"):
        choose_backend(folder, "llama.cpp")


def test_a_missing_file_and_an_unknown_choice_are_refused(tmp_path):
    with pytest.raises(ModelFormatError, match="nothere.gguf"):
        choose_backend(tmp_path / "nothere.gguf", "auto")
    with pytest.raises(RequestError, match="backend must be one of auto, wisp, llama.cpp"):
        choose_backend(tmp_path / "x.gguf", "vllm")
    with pytest.raises(RequestError, match="backend must be one of"):
        EngineOptions(backend="llamacpp")
    assert EngineOptions().backend == "auto"


def test_a_tokenizer_wisp_does_not_build_sends_the_file_to_llama_cpp(gguf_files, tmp_path):
    from tests.gguf.vocabs import rewrite_gguf

    source = gguf_files.converted("qwen3_moe", "f32")
    deepseek = rewrite_gguf(source, tmp_path / "pre.gguf", lambda key: key != "tokenizer.ggml.pre",
                            lambda writer, fields: writer.add_tokenizer_pre("deepseek-llm"))
    choice = choose_backend(deepseek, "auto")
    assert choice.backend == "llama.cpp" and "pre-tokenizer 'deepseek-llm'" in choice.reason
