"""Which tokens llama.cpp treats as control tokens and which end generation, beyond what the GGUF metadata
names: llama-vocab.cpp recognises end-of-turn and fill-in-the-middle tokens by their text, makes them control
tokens whatever their stored type, and stops on them (its EOG set). Wisp follows it so that a GGUF file stops
and parses special text the same on both engines."""

from __future__ import annotations

from dataclasses import dataclass

from engine.gguf.reader import GgufFile

CONTROL, USER_DEFINED = 3, 4  # gguf TokenType values
# token texts llama.cpp ends generation on
END_OF_GENERATION = frozenset({
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>",
    "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
})
# fill-in-the-middle pad / repository / file separator tokens, also end-of-generation for llama.cpp
FIM_STOPS = {
    "fim_pad_token_id": ("<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"),
    "fim_rep_token_id": ("<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"),
    "fim_sep_token_id": ("<|file_sep|>",),
}
END_OF_TURN = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>",
               "_<EOT>", "<｜end▁of▁sentence｜>", "<end_of_utterance>")
# gpt-oss's o200k_harmony: llama.cpp renders the message framing as text, and when <|return|> and <|call|> end
# generation, <|end|> (which closes every message, the analysis one too) does not.
HARMONY_RENDERED = ("<|channel|>", "<|message|>", "<|start|>", "<|constrain|>")
HARMONY_ENDS = ("<|return|>", "<|call|>")
FIM_OTHER = ("<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "<|fim_suffix|>", "<fim-suffix>",
             "<fim_suffix>", "<SUF>", "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>")


@dataclass(frozen=True)
class SpecialTokens:
    """`types`: the token types with llama.cpp's overrides applied; `end_of_generation`: the ids it stops on."""

    types: list[int]
    end_of_generation: frozenset[int]


def special_tokens(file: GgufFile, tokens: list[str], types: list[int], eos: int | None) -> SpecialTokens:
    """llama.cpp's view of the vocabulary's special tokens (eos: the file's tokenizer.ggml.eos_token_id)."""
    ids = {text: i for i, text in enumerate(tokens)}
    types = list(types)
    stops = {eos} if eos is not None else set()
    for key, texts in (("eot_token_id", END_OF_TURN), ("eom_token_id", ("<|eom_id|>",)), *FIM_STOPS.items()):
        token_id = _metadata_id(file, key, len(tokens))
        if token_id is None:  # found by its text: llama.cpp makes it a control token
            token_id = next((ids[text] for text in texts if text in ids), None)
            if token_id is not None:
                types[token_id] = CONTROL
        if token_id is not None:
            stops.add(token_id)
    for text in END_OF_GENERATION:
        if text in ids:
            types[ids[text]] = CONTROL
            stops.add(ids[text])
    for text in FIM_OTHER:
        if text in ids:
            types[ids[text]] = CONTROL
    _apply_harmony_rules(ids, types, stops)
    return SpecialTokens(types, frozenset(stops))


def _apply_harmony_rules(ids: dict[str, int], types: list[int], stops: set[int]) -> None:
    for text in HARMONY_RENDERED:
        if text in ids:
            types[ids[text]] = USER_DEFINED
    end = ids.get("<|end|>")
    if end in stops and all(ids.get(text) in stops for text in HARMONY_ENDS):
        stops.discard(end)
        types[end] = USER_DEFINED


def _metadata_id(file: GgufFile, key: str, vocab_size: int) -> int | None:
    value = file.get(f"tokenizer.ggml.{key}")
    return int(value) if value is not None and 0 <= int(value) < vocab_size else None
