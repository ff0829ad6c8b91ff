"""Sampling parameters of one request (a plain, picklable dataclass shared by the API and the runtime)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.sampling_checks import check_sampling

# Below this temperature sampling is greedy: logits / 1e-40 overflow fp32 to inf (and 5e-324 rounds to 0.0),
# and softmax of those is NaN; at 1e-5 the top token holds practically all the mass unless logits tie.
MIN_TEMPERATURE = 1e-5

# One default per surface. The engine, the CLI and engine.api sample greedily (SamplingParams' own defaults:
# repeatable unless asked otherwise); each protocol keeps the defaults its clients expect; the app keeps its own.
OPENAI_DEFAULTS = {"temperature": 1.0, "top_p": 1.0}  # OpenAI's API reference
OLLAMA_DEFAULTS = {"temperature": 0.8, "top_p": 0.9, "top_k": 40}  # Ollama's, where a Modelfile sets none


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 (or below MIN_TEMPERATURE) is greedy; top_k 0, top_p 1 and min_p 0 disable those filters;
    seed makes sampling repeatable. Every value is checked when it is made (engine.sampling_checks).

    The penalties and logit_bias change the logits before any of that (greedy included): repetition_penalty
    (vLLM's and transformers': > 1 divides the positive logits and multiplies the negative ones of every token in
    the prompt or the output), presence_penalty and frequency_penalty (OpenAI's: subtracted once for a token seen in
    the output, and once per time it was seen), logit_bias ((token id, bias) pairs added to those tokens' logits).
    top_logprobs asks for that many most likely alternatives of every generated token (OpenAI's `top_logprobs`).
    json_schema (JSON text) constrains the output to JSON that the schema accepts; '{"type": "object"}' asks for
    any JSON object (OpenAI's json_object)."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()
    top_logprobs: int = 0
    json_schema: str | None = None

    def __post_init__(self):
        check_sampling(self)

    @property
    def is_greedy(self) -> bool:
        return self.temperature < MIN_TEMPERATURE

    @property
    def changes_logits(self) -> bool:
        """Whether a penalty, a bias or a grammar applies before the token is chosen."""
        return bool(self.repetition_penalty != 1.0 or self.presence_penalty or self.frequency_penalty
                    or self.logit_bias or self.json_schema is not None)
