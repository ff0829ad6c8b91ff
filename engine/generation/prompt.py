"""A request's prompt as token ids: raw text, chat messages through the template, or ids as given."""

from __future__ import annotations

from engine.errors import PromptTooLongError, RequestError
from engine.generation.fim import fim_prompt_ids
from engine.generation.reasoning_options import template_variables
from engine.requests import GenerateRequest


def prompt_token_ids(request: GenerateRequest, tokenizer, max_model_len: int) -> list[int]:
    """Raises PromptTooLongError when the prompt is empty or leaves no room to generate."""
    if request.prompt_token_ids is not None:
        ids = list(request.prompt_token_ids)
        check_vocabulary(ids, getattr(tokenizer, "vocab_size", None))
    elif request.messages is not None:
        tools = [dict(tool) for tool in request.tools] if request.tools else None
        ids = tokenizer.encode_chat(list(request.messages), add_generation_prompt=True, tools=tools,
                                    **template_variables(request))
    elif request.suffix is not None:
        ids = list(fim_prompt_ids(tokenizer, request.prompt, request.suffix))
    else:
        ids = tokenizer.encode(request.prompt, add_special_tokens=True)
    if not ids:
        raise PromptTooLongError("the prompt is empty after tokenisation")
    if len(ids) >= max_model_len:
        raise PromptTooLongError(f"the prompt has {len(ids)} tokens but the context holds {max_model_len}; shorten it")
    return ids


def check_vocabulary(ids: list[int], vocab_size: int | None) -> None:
    """An id past the embedding table would fail the whole batch's step, not just this request."""
    outside = next((i for i in ids if i >= vocab_size), None) if vocab_size is not None else None
    if outside is not None:
        raise RequestError(f"prompt token id {outside} is outside the vocabulary (0..{vocab_size - 1})", "prompt")
