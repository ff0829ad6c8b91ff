"""What the server knows about the one model it serves: its public id, its context, and (for Wisp's own
engine) its tokenizer, used to check token-id prompts, build fill-in-the-middle prompts and name tokens."""

from __future__ import annotations

from dataclasses import dataclass

from engine.model_path import DEMO_MODEL
from engine.server.api_errors import bad_request

# (prefix, suffix, middle) special tokens, in prefix-suffix-middle order, of the code models that have them.
FIM_TOKEN_SETS = (
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),  # Qwen2.5-Coder, Qwen3-Coder
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),  # StarCoder, SantaCoder
    ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),  # DeepSeek-Coder
)


def served_model_id(info) -> str:
    """The id clients put in `model`: the HF id or folder name (remote: the remote's id)."""
    return "wisp-demo" if info.path == str(DEMO_MODEL) else info.name


@dataclass(frozen=True)
class ServedModel:
    id: str
    max_model_len: int  # 0 when unknown (a remote backend that does not say)
    tokenizer: object | None  # engine.tokenizer.Tokenizer (or GGUF's); None for backends without one (remote)
    tool_calls: bool = False  # the model takes tools and the engine reads its calls (ModelInfo.tool_calls)
    has_chat_template: bool = True
    family: str = ""  # the HF model_type (Ollama's details.family)

    @classmethod
    def of(cls, engine, model_id: str | None = None) -> "ServedModel":
        # api.Engine keeps its backend private; like api.expert_counters we read the tokenizer off it.
        tokenizer = getattr(engine._core, "tokenizer", None)
        info = engine.info
        return cls(model_id or served_model_id(info), info.max_model_len, tokenizer,
                   bool(getattr(info, "tool_calls", False)), bool(getattr(info, "has_chat_template", True)),
                   str(getattr(info, "model_type", "")))

    @property
    def chat_template(self) -> str:
        return getattr(self.tokenizer, "chat_template_source", "") or ""

    def fim_token_ids(self) -> tuple[int, int, int] | None:
        token_to_id = getattr(self.tokenizer, "token_to_id", None)  # tokenizers without it: no FIM
        if token_to_id is None:
            return None
        for tokens in FIM_TOKEN_SETS:
            ids = tuple(token_to_id(token) for token in tokens)
            if None not in ids:
                return ids
        return None

    def fim_prompt_ids(self, prefix: str, suffix: str) -> tuple[int, ...]:
        """<prefix-token> prefix <suffix-token> suffix <middle-token>; 400 if the model has no FIM tokens."""
        ids = self.fim_token_ids()
        if ids is None:
            raise bad_request(f"model '{self.id}' has no fill-in-the-middle tokens, so `suffix` cannot be used; "
                              "send the text before the cursor as `prompt` alone", param="suffix")
        prefix_id, suffix_id, middle_id = ids
        encode = self.tokenizer.encode
        return (prefix_id, *encode(prefix, add_special_tokens=False), suffix_id,
                *encode(suffix, add_special_tokens=False), middle_id)

    def check_token_ids(self, ids: list[int]) -> None:
        vocab = getattr(self.tokenizer, "vocab_size", None)
        for token_id in ids:
            if token_id < 0 or (vocab is not None and token_id >= vocab):
                known = f" (0..{vocab - 1})" if vocab is not None else ""
                raise bad_request(f"prompt token id {token_id} is outside the vocabulary{known}", "prompt")

    def token_string(self, token_id: int, text: str, as_id: bool) -> str:
        """How logprobs name a token: "token_id:N" (vLLM's convention) or the token's own text."""
        if as_id:
            return f"token_id:{token_id}"
        if self.tokenizer is None or token_id < 0:
            return text
        return self.tokenizer.decode([token_id], skip_special_tokens=False)
