"""Sampling parameters of one request (a plain, picklable dataclass shared by the API and the runtime)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import RequestError
from engine.request_checks import INT32_MAX, check_float, check_int, check_seed, check_stop

# Below this temperature sampling is greedy: logits / 1e-40 overflow fp32 to inf (and 5e-324 rounds to 0.0),
# and softmax of those is NaN; at 1e-5 the top token holds practically all the mass unless logits tie.
MIN_TEMPERATURE = 1e-5


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 (or below MIN_TEMPERATURE) is greedy; top_k 0 and top_p 1 disable those filters; seed makes
    sampling repeatable."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False

    def __post_init__(self):
        check_int(self.max_tokens, "max_tokens", 1, INT32_MAX)
        if not 0.0 <= check_float(self.temperature, "temperature") <= 100.0:
            raise RequestError(f"temperature must be between 0 and 100, got {self.temperature}", "temperature")
        if not 0.0 < check_float(self.top_p, "top_p") <= 1.0:
            raise RequestError(f"top_p must be in (0, 1], got {self.top_p}", "top_p")
        check_int(self.top_k, "top_k", 0, INT32_MAX)
        check_seed(self.seed)
        check_stop(self.stop)
        if not isinstance(self.ignore_eos, bool):
            raise RequestError("ignore_eos must be true or false", "ignore_eos")

    @property
    def is_greedy(self) -> bool:
        return self.temperature < MIN_TEMPERATURE
