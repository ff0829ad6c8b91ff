"""engine.text.tokenizer.Tokenizer built from a GGUF file's tokenizer.ggml.* metadata, tokenising as llama.cpp does:
byte-level BPE ("gpt2": tokens, merges, the pre-tokenizer named by tokenizer.ggml.pre) or SentencePiece BPE
("llama": tokens, scores, byte fallback). Control and user-defined tokens are matched in text first."""

from __future__ import annotations

from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers import Tokenizer as Backend

from engine.text.chat_template import ChatTemplate
from engine.errors import TokenizerError, UnsupportedModelError
from engine.gguf.reader import GgufFile
from engine.gguf.special_tokens import special_tokens
from engine.gguf.vocab import CONTROL, GPT4O_REGEX, LLAMA3_REGEX, QWEN2_REGEX, USER_DEFINED
from engine.text.tokenizer import ModelTokenIds, Tokenizer

UNKNOWN = 2  # gguf's TokenType.UNKNOWN (<unk>)
# tokenizer.ggml.pre -> the split regex before byte-level BPE (llama-vocab.cpp's lists); None: GPT-2's own.
# llama.cpp's "default" (a file without the key) is a regex set of its own, not one of these.
PRE_TOKENIZERS = {"gpt-2": None, "olmo": None, "mpt": None, "qwen2": QWEN2_REGEX, "llama-bpe": LLAMA3_REGEX,
                  "llama3": LLAMA3_REGEX, "llama-v3": LLAMA3_REGEX, "gpt-4o": GPT4O_REGEX}
IGNORE_MERGES = {"llama-bpe", "llama3", "llama-v3"}  # llama.cpp takes a whole pre-token found in the vocabulary
ADD_BOS_DEFAULT = {"llama-bpe", "llama3", "llama-v3"}
SPECIAL_IDS = {"bos_token": "bos_token_id", "eos_token": "eos_token_id", "unk_token": "unknown_token_id",
               "pad_token": "padding_token_id"}
SPM_SPACE = "▁"
LLAMA_CPP_BOS = {"gpt2": 11, "llama": 1}  # what llama.cpp adds when add_bos is set and the file names no BOS


def gguf_tokenizer(file: GgufFile) -> Tokenizer:
    """The file's tokenizer; raises UnsupportedModelError for a tokenizer model or pre-tokenizer Wisp does not
    build, TokenizerError when the vocabulary keys are missing."""
    check_tokenizer(file)
    model = file.get("tokenizer.ggml.model")
    tokens, types = _vocab(file)
    backend = _byte_level_bpe(file, tokens) if model == "gpt2" else _sentencepiece(file, tokens)
    ids = {name: _id(file, f"tokenizer.ggml.{key}", len(tokens)) for name, key in SPECIAL_IDS.items()}
    # llama.cpp's defaults when the file does not say
    add_bos = bool(file.get("tokenizer.ggml.add_bos_token",
                            model == "llama" or file.get("tokenizer.ggml.pre") in ADD_BOS_DEFAULT))
    add_eos = bool(file.get("tokenizer.ggml.add_eos_token", False))
    if ids["bos_token"] is None and add_bos:
        ids["bos_token"] = LLAMA_CPP_BOS[model]
    llama_cpp_view = special_tokens(file, tokens, types, ids["eos_token"])
    _register_added_tokens(backend, tokens, llama_cpp_view.types)
    _post_process(backend, tokens, ids, add_bos, add_eos)
    named = {name: tokens[i] for name, i in ids.items() if i is not None}
    return Tokenizer(backend, named, chat_templates(file),
                     ModelTokenIds(llama_cpp_view.end_of_generation, ids["bos_token"], ids["pad_token"]))


def check_tokenizer(file: GgufFile) -> None:
    """Raises UnsupportedModelError unless Wisp builds the file's tokenizer, from the metadata's names alone."""
    model = file.get("tokenizer.ggml.model")
    if model not in ("gpt2", "llama"):
        raise UnsupportedModelError(f"{file.path}: tokenizer model '{model}' (tokenizer.ggml.model) is not one "
                                    "Wisp builds (gpt2 byte-level BPE, llama SentencePiece)")
    pre = file.get("tokenizer.ggml.pre", "default")
    if model == "gpt2" and pre not in PRE_TOKENIZERS:
        raise UnsupportedModelError(f"{file.path}: pre-tokenizer '{pre}' (tokenizer.ggml.pre) is not one Wisp's "
                                    f"engine knows ({', '.join(sorted(PRE_TOKENIZERS))}); use --backend llama.cpp")


def chat_templates(file: GgufFile) -> dict[str, ChatTemplate]:
    """tokenizer.chat_template is the default; tokenizer.chat_template.NAME are named extras (tool_use, ...)."""
    prefix = "tokenizer.chat_template"
    return {("default" if key == prefix else key[len(prefix) + 1:]): ChatTemplate(value, f"{file.path} ({key})")
            for key, value in file.fields.items()
            if (key == prefix or key.startswith(prefix + ".")) and isinstance(value, str)}


def _vocab(file: GgufFile) -> tuple[list[str], list[int]]:
    if "tokenizer.ggml.tokens" not in file.fields:
        raise TokenizerError(f"{file.path}: no vocabulary (tokenizer.ggml.tokens) in the GGUF metadata")
    tokens = file.array("tokenizer.ggml.tokens")
    types = ([int(t) for t in file.array("tokenizer.ggml.token_type")] if "tokenizer.ggml.token_type" in file.fields
             else [1] * len(tokens))
    if len(types) != len(tokens):
        raise TokenizerError(f"{file.path}: tokenizer.ggml.token_type has {len(types)} entries for "
                             f"{len(tokens)} tokens")
    return tokens, types


def _id(file: GgufFile, key: str, vocab_size: int) -> int | None:
    value = file.get(key)
    return int(value) if value is not None and 0 <= int(value) < vocab_size else None


def _token_ids(tokens: list[str]) -> dict[str, int]:
    """token text -> id; a text listed twice maps to its last id, as in llama.cpp."""
    return {text: i for i, text in enumerate(tokens)}


def _byte_level_bpe(file: GgufFile, tokens: list[str]) -> Backend:
    pre = file.get("tokenizer.ggml.pre", "default")
    if "tokenizer.ggml.merges" not in file.fields:
        raise TokenizerError(f"{file.path}: a BPE vocabulary without merges (tokenizer.ggml.merges)")
    merges = [tuple(merge.split(" ", 1)) for merge in file.array("tokenizer.ggml.merges")]
    backend = Backend(models.BPE(_token_ids(tokens), merges, ignore_merges=pre in IGNORE_MERGES))
    regex = PRE_TOKENIZERS[pre]
    if regex is None:
        backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    else:
        backend.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    backend.decoder = decoders.ByteLevel()
    return backend


def _sentencepiece(file: GgufFile, tokens: list[str]) -> Backend:
    """SentencePiece BPE as llama.cpp runs it: repeatedly merge the adjacent pair whose joined text is the
    highest-scoring token. As BPE merges ranked by that score (as transformers' LlamaConverter builds them)."""
    if "tokenizer.ggml.scores" not in file.fields:
        raise TokenizerError(f"{file.path}: a SentencePiece vocabulary without scores (tokenizer.ggml.scores)")
    scores = file.array("tokenizer.ggml.scores")
    vocab = _token_ids(tokens)
    ranked = []
    for token_id, piece in enumerate(tokens):
        if len(piece) < 2:
            continue
        for cut in range(1, len(piece)):
            if piece[:cut] in vocab and piece[cut:] in vocab:
                ranked.append((-float(scores[token_id]), token_id, cut))
    merges = [(tokens[i][:cut], tokens[i][cut:]) for _, i, cut in sorted(ranked)]
    unk = _id(file, "tokenizer.ggml.unknown_token_id", len(tokens))
    backend = Backend(models.BPE(vocab, merges, unk_token=tokens[unk if unk is not None else 0], fuse_unk=True,
                                 byte_fallback=True))
    space = [normalizers.Replace(" ", SPM_SPACE)]
    if file.get("tokenizer.ggml.add_space_prefix", True):
        space.insert(0, normalizers.Prepend(SPM_SPACE))  # llama.cpp: at the start and after every special token
    backend.normalizer = normalizers.Sequence(space)
    backend.decoder = decoders.Sequence([decoders.Replace(SPM_SPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    return backend


def _register_added_tokens(backend: Backend, tokens: list[str], types: list[int]) -> None:
    """Control and unknown tokens are special (skipped when decoding); user-defined ones are plain text matched
    whole. llama.cpp matches all three in text before splitting the rest."""
    added = [AddedToken(text, special=kind != USER_DEFINED, normalized=False) for text, kind in zip(tokens, types)
             if kind in (CONTROL, UNKNOWN, USER_DEFINED) and text]
    backend.add_tokens(added)


def _post_process(backend: Backend, tokens: list[str], ids: dict, add_bos: bool, add_eos: bool) -> None:
    bos, eos = ids["bos_token"], ids["eos_token"]
    single = ([f"{tokens[bos]}:0"] if add_bos and bos is not None else []) + ["$A:0"]
    single += [f"{tokens[eos]}:0"] if add_eos and eos is not None else []
    if len(single) > 1:
        special = [(tokens[i], i) for i in {bos if add_bos else None, eos if add_eos else None} if i is not None]
        backend.post_processor = processors.TemplateProcessing(single=" ".join(single), special_tokens=special)
