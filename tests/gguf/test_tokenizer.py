"""The tokenizer built from GGUF metadata tokenises as llama.cpp does on the same file, and as the Hugging Face
tokenizer of the folder the file was converted from; specials, end-of-generation ids and the chat template too."""

import pytest

from engine.gguf.convert import convert
from engine.gguf.reader import GgufFile
from engine.gguf.tokenizer import gguf_tokenizer
from engine.gguf.vocab import GPT4O_REGEX, LLAMA3_REGEX, QWEN2_REGEX
from engine.text.tokenizer import Tokenizer
from tests.gguf.models import llama_cpp_end_of_generation, llama_cpp_tokenize, write_model
from tests.gguf.vocabs import rewrite_gguf, save_split_tokenizer, with_spm_vocab

TEXTS = [
    "Hello world",
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "héllo wörld 你好, naïve café — ½ ñ",
    "emoji 🙂🚀 and 👩‍👩‍👧 family",
    "  leading, trailing   \n\n\t tabs\t\tand   runs   ",
    "<|im_start|>user\nhi there<|im_end|>\n<|im_start|>assistant\n",
    "numbers 1234567 3.14159 and it's they're we'll I'd",
    "<think>plan</think> <|fim_prefix|>x<|file_sep|> <unk> <s> </s>",
    "",
]


@pytest.fixture(scope="module")
def bpe_files(gguf_files, tmp_path_factory):
    """pre-tokenizer name -> (HF folder, GGUF file): gpt-2 (tests/tiny_models) and olmo (the same regex in
    llama.cpp, the name OLMoE files carry), qwen2, llama-bpe and gpt-4o (gpt-oss's o200k) regexes."""
    root = tmp_path_factory.mktemp("bpe")
    folder, path = gguf_files.folder("qwen3_moe"), gguf_files.converted("qwen3_moe", "f32")
    olmo = rewrite_gguf(path, root / "olmo.gguf", lambda key: key != "tokenizer.ggml.pre",
                        lambda writer, fields: writer.add_tokenizer_pre("olmo"))
    files = {"gpt-2": (folder, path), "olmo": (folder, olmo)}
    for pre, regex, ignore_merges in (("qwen2", QWEN2_REGEX, False), ("llama-bpe", LLAMA3_REGEX, True),
                                      ("gpt-4o", GPT4O_REGEX, False)):
        folder = write_model(root / pre, "qwen3_moe")
        save_split_tokenizer(folder, regex, ignore_merges)
        files[pre] = (folder, convert(folder, root / f"{pre}.gguf", "f32").path)
    return files


@pytest.fixture(scope="module")
def spm_file(gguf_files, tmp_path_factory):
    return with_spm_vocab(gguf_files.converted("mixtral", "f32"), tmp_path_factory.mktemp("spm") / "spm.gguf")


@pytest.mark.parametrize("pre", ["gpt-2", "olmo", "qwen2", "llama-bpe", "gpt-4o"])
def test_byte_level_bpe_matches_llama_cpp_and_the_hf_tokenizer(pre, bpe_files):
    folder, path = bpe_files[pre]
    file = GgufFile(path)
    assert file.get("tokenizer.ggml.pre") == pre
    tokenizer, reference = gguf_tokenizer(file), Tokenizer.from_folder(folder)
    for text in TEXTS:
        for add_special in (True, False):
            ids = tokenizer.encode(text, add_special_tokens=add_special)
            assert ids == llama_cpp_tokenize(path, text, add_special), (text, add_special)
            assert ids == reference.encode(text, add_special_tokens=add_special), (text, add_special)
        assert tokenizer.decode(tokenizer.encode(text)) == reference.decode(reference.encode(text))
    assert tokenizer.special_token_ids == reference.special_token_ids
    assert tokenizer.eos_token_ids == llama_cpp_end_of_generation(path)
    assert tokenizer.pad_token_id == reference.pad_token_id
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert tokenizer.encode_chat(messages) == reference.encode_chat(messages)


def test_sentencepiece_matches_llama_cpp(spm_file):
    file = GgufFile(spm_file)
    tokenizer = gguf_tokenizer(file)
    for text in [*TEXTS, " leading space", "a<|im_end|> b<|im_end|>c"]:
        for add_special in (True, False):
            ids = tokenizer.encode(text, add_special_tokens=add_special)
            assert ids == llama_cpp_tokenize(spm_file, text, add_special), (text, add_special)
    byte_fallback = tokenizer.encode("🚀", add_special_tokens=False)  # not in the training corpus
    assert [tokenizer.id_to_token(i) for i in byte_fallback][-4:] == ["<0xF0>", "<0x9F>", "<0x9A>", "<0x80>"]
    assert tokenizer.decode(tokenizer.encode(TEXTS[2])) == TEXTS[2]
    assert tokenizer.bos_token_id == 1 and tokenizer.special_tokens["bos_token"] == "<s>"
    assert tokenizer.eos_token_ids == llama_cpp_end_of_generation(spm_file)
    assert tokenizer.encode_chat([{"role": "user", "content": "hi"}])[:1] == [3]  # <|im_start|>, no BOS added


def test_a_tokenizer_model_wisp_does_not_build_is_named(spm_file, tmp_path):
    from engine.errors import UnsupportedModelError

    file = GgufFile(spm_file)
    file.fields["tokenizer.ggml.model"] = "t5"
    with pytest.raises(UnsupportedModelError, match="tokenizer model 't5'"):
        gguf_tokenizer(file)
    file.fields["tokenizer.ggml.model"] = "gpt2"
    file.fields["tokenizer.ggml.pre"] = "default"
    with pytest.raises(UnsupportedModelError, match="pre-tokenizer 'default'"):
        gguf_tokenizer(file)
