"""What the server knows about the one model it serves: its public id, its context, and (for Wisp's own
engine) its tokenizer, used to check token-id prompts, build fill-in-the-middle prompts and name tokens."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import RequestError
from engine.generation.fim import fim_prompt_ids, fim_token_ids
from engine.loading.model_path import DEMO_MODEL
from engine.server.api_errors import bad_request
from engine.server.model_size import model_size


def served_model_id(info) -> str:
    """The id clients put in `model`: the HF id or folder name (remote: the remote's id)."""
    return "wisp-demo" if info.path == str(DEMO_MODEL) else info.name


@dataclass(frozen=True)
class ServedModel:
    id: str
    max_model_len: int  # 0 when unknown (a remote backend that does not say)
    tokenizer: object | None  # engine.text.tokenizer.Tokenizer (or GGUF's); None for backends without one (remote)
    tool_calls: bool = False  # the model takes tools and the engine reads its calls (ModelInfo.tool_calls)
    has_chat_template: bool = True
    family: str = ""  # the HF model_type (Ollama's details.family)
    size_bytes: int = 0  # the weight files on disk (0: unknown, e.g. a remote backend)
    num_parameters: int = 0  # from the safetensors headers (0: unknown)
    sees_images: bool = False  # the engine has a vision tower (engine.api.Engine.sees_images)

    @classmethod
    def of(cls, engine, model_id: str | None = None) -> "ServedModel":
        tokenizer = getattr(engine, "tokenizer", None)
        info = engine.info
        size_bytes, num_parameters = model_size(str(getattr(info, "path", "") or ""))
        return cls(model_id or served_model_id(info), info.max_model_len, tokenizer,
                   bool(getattr(info, "tool_calls", False)), bool(getattr(info, "has_chat_template", True)),
                   str(getattr(info, "model_type", "")), size_bytes, num_parameters,
                   bool(getattr(engine, "sees_images", False)))

    @property
    def chat_template(self) -> str:
        return getattr(self.tokenizer, "chat_template_source", "") or ""

    def fim_token_ids(self) -> tuple[int, int, int] | None:
        return fim_token_ids(self.tokenizer)

    def fim_prompt_ids(self, prefix: str, suffix: str) -> tuple[int, ...]:
        """<prefix-token> prefix <suffix-token> suffix <middle-token>; 400 if the model has no FIM tokens."""
        try:
            return fim_prompt_ids(self.tokenizer, prefix, suffix, f"model '{self.id}'")
        except RequestError as error:
            raise bad_request(str(error), param="suffix") from None

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
