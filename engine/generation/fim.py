"""Fill-in-the-middle prompts for code models whose tokenizer has FIM tokens: the text before the cursor and the
text after it, in prefix-suffix-middle order, so that the model writes what goes between."""

from __future__ import annotations

from engine.errors import RequestError

# (prefix, suffix, middle) special tokens, in prefix-suffix-middle order, of the code models that have them.
FIM_TOKEN_SETS = (
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),  # Qwen2.5-Coder, Qwen3-Coder
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),  # StarCoder, SantaCoder
    ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),  # DeepSeek-Coder
)


def fim_token_ids(tokenizer) -> tuple[int, int, int] | None:
    """The model's (prefix, suffix, middle) token ids; None when it has none (or its tokenizer cannot say)."""
    token_to_id = getattr(tokenizer, "token_to_id", None)
    if token_to_id is None:
        return None
    for tokens in FIM_TOKEN_SETS:
        ids = tuple(token_to_id(token) for token in tokens)
        if None not in ids:
            return ids
    return None


def fim_prompt_ids(tokenizer, prefix: str, suffix: str, model_name: str = "this model") -> tuple[int, ...]:
    """<prefix-token> prefix <suffix-token> suffix <middle-token>; RequestError when the model has no FIM tokens."""
    ids = fim_token_ids(tokenizer)
    if ids is None:
        raise RequestError(f"{model_name} has no fill-in-the-middle tokens, so `suffix` cannot be used; "
                           "send the text before the cursor as `prompt` alone", "suffix")
    prefix_id, suffix_id, middle_id = ids
    encode = tokenizer.encode
    return (prefix_id, *encode(prefix, add_special_tokens=False), suffix_id,
            *encode(suffix, add_special_tokens=False), middle_id)
