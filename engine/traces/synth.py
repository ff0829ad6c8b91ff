"""Synthetic routing traces from stated statistics: `wisp trace synth`.

The model. At every layer each token's router scores are ``bias[e] + z[e]``; its top-k experts are the
k highest scores, in score order. ``bias`` sets expert popularity, ``z`` is Gaussian noise that follows
an AR(1) process along the tokens of a request (``z_t = rho z_(t-1) + sqrt(1 - rho^2) eps_t``, ``z_0``
and ``eps`` standard normal, independent per layer and request). Every token's scores therefore have
the same distribution, so popularity is the same at every position, and ``rho`` sets how many of a
token's experts the previous token also used (the carry-over). Each layer ranks its experts in its own
random order. Nothing beyond these two statistics is modelled: no topic drift, no cross-layer
correlation.

Popularity law: the expert of rank r (1 = most used) gets a share of routing proportional to
``r^-s exp(-r / c)`` (a Zipf law with an exponential cutoff). Stated either as the Zipf exponent alone
(``skew``, no cutoff) or by the two figures STATS.md reports for a trace, how many experts carry 90% of
routing and the most popular expert's share, from which ``s`` and ``c`` are solved. ``bias`` and
``rho`` are then calibrated once by simulation (a fixed calibration seed), so the statistics hold
for the trace that `wisp trace stats` measures.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from engine.errors import WispError
from engine.traces.format import Trace, TraceHeader, ids_dtype

COVERAGE = 0.9  # engine.traces.stats.COVERAGE
CALIBRATION_SEED = 20261201
CALIBRATION_TOKENS = 16384

# Published routing statistics per benchmark shape (docs/design.md, "Figures the code relies on"; STATS.md):
# Qwen3-30B-A3B: 44-48% of top-8 carried over (0.46 the middle), 65 of 128 experts cover 90%, top expert 4.3%;
# Mixtral-8x7B: 38% of the previous token's experts reused. None is published here for OLMoE-1B-7B, gpt-oss-20b
# or GLM-4.5-Air (their shipped traces state assumed figures: resources/traces/STATS.md).
PUBLISHED = {
    "qwen3-30b-a3b": {"model": "Qwen3-30B-A3B", "carry_over": 0.46, "cover90": 65, "top_share": 0.043},
    "mixtral-8x7b": {"model": "Mixtral-8x7B", "carry_over": 0.38},
    "olmoe-1b-7b": {"model": "OLMoE-1B-7B"},
    "gpt-oss-20b": {"model": "gpt-oss-20b"},
    "glm-4.5-air": {"model": "GLM-4.5-Air"},
}


class SynthError(WispError):
    """The requested statistics cannot be generated (out of range, or missing for this shape)."""


@dataclasses.dataclass(frozen=True)
class Popularity:
    """Share of routing of the expert of rank r (1-based): proportional to r^-skew exp(-r / cutoff)."""

    skew: float
    cutoff: float = float("inf")

    def shares(self, num_experts: int) -> np.ndarray:
        ranks = np.arange(1, num_experts + 1, dtype=float)
        weights = ranks ** -self.skew * np.exp(-ranks / self.cutoff)
        return weights / weights.sum()


def cover(shares: np.ndarray, coverage: float = COVERAGE) -> float:
    """Experts (fractional, cumulative share interpolated linearly) that carry `coverage` of routing.
    Rounded up it is engine.traces.stats.experts_to_cover."""
    cumulative = np.concatenate(([0.0], np.cumsum(np.sort(shares)[::-1])))
    n = int(np.searchsorted(cumulative, coverage))
    return n - 1 + (coverage - cumulative[n - 1]) / (cumulative[n] - cumulative[n - 1])


def bisect(f, lo: float, hi: float, target: float, steps: int = 60) -> float:
    """x in [lo, hi] with f(x) = target, f increasing."""
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def fit_popularity(num_experts: int, cover90: int, top_share: float) -> Popularity:
    """The law with `cover90` experts carrying 90% (as stats counts them) and the top expert at `top_share`."""
    target = cover90 - 0.5  # stats rounds the fractional cover up

    def law_for(skew: float) -> Popularity:  # the cutoff that gives the cover at this skew
        log_cutoff = bisect(lambda lc: cover(Popularity(skew, np.exp(lc)).shares(num_experts)),
                            np.log(0.05), np.log(1e6), target)
        return Popularity(skew, float(np.exp(log_cutoff)))

    uniform_cover = int(np.ceil(cover(np.full(num_experts, 1.0 / num_experts))))
    if not 2 <= cover90 <= uniform_cover:
        raise SynthError(f"--cover90 {cover90} is out of range: 2..{uniform_cover} of {num_experts} experts "
                         f"(uniform routing needs {uniform_cover})")
    low, high = (law_for(s).shares(num_experts)[0] for s in (0.0, 3.0))  # skew >= 0: rank 1 is the top
    if not low <= top_share <= high:
        raise SynthError(f"--top-share {top_share} cannot go with --cover90 {cover90} of {num_experts} experts: "
                         f"this popularity law spans {low:.4f}..{high:.4f}")
    return law_for(bisect(lambda s: law_for(s).shares(num_experts)[0], 0.0, 3.0, top_share, steps=40))


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores along the last axis, highest first."""
    part = np.argpartition(-scores, k - 1, axis=-1)[..., :k]
    order = np.argsort(-np.take_along_axis(scores, part, axis=-1), axis=-1, kind="stable")
    return np.take_along_axis(part, order, axis=-1)


def inclusion(ids: np.ndarray, num_experts: int) -> np.ndarray:
    return np.bincount(ids.reshape(-1), minlength=num_experts) / ids.shape[0]


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Mean share of a row's ids in `a` that the same row of `b` also holds."""
    return float((a[..., :, None] == b[..., None, :]).any(axis=-1).mean())


@lru_cache(maxsize=32)
def calibrate(shares: tuple[float, ...], k: int, carry_over: float) -> tuple[np.ndarray, float]:
    """(bias per rank, rho) so that top-k of bias + N(0, 1) includes rank r with probability k x share[r], and
    consecutive tokens share `carry_over` of their top-k. Common random numbers keep both fits monotone."""
    target = k * np.asarray(shares)
    if target.max() > 1:
        raise SynthError(f"the top expert's share {max(shares):.3f} exceeds 1/top_k = {1 / k:.3f}: "
                         "every token would need it more than once")
    num_experts = target.size
    rng = np.random.default_rng(CALIBRATION_SEED)
    first, noise = (rng.standard_normal((CALIBRATION_TOKENS, num_experts)) for _ in range(2))
    probit = NormalDist().inv_cdf
    want = np.array([probit(min(max(p, 1e-6), 1 - 1e-6)) for p in target])
    bias = want.copy()
    floor = 0.5 / CALIBRATION_TOKENS
    for _ in range(8):  # Newton-like steps in probit space; they reach the sampling noise in ~5
        got = np.clip(inclusion(top_k(bias + first, k), num_experts), floor, 1 - floor)
        bias += want - np.array([probit(p) for p in got])
    before = top_k(bias + first, k)

    def carried(rho: float) -> float:
        return overlap(top_k(bias + rho * first + np.sqrt(1 - rho * rho) * noise, k), before)

    lowest, highest = carried(0.0), carried(0.999)
    if not lowest <= carry_over <= highest:
        raise SynthError(f"--carry-over {carry_over} is out of reach at this popularity: "
                         f"{lowest:.3f} (independent tokens) .. {highest:.3f}")
    bias.flags.writeable = False  # cached: shared by every later call
    return bias, bisect(carried, 0.0, 0.999, carry_over, steps=20)


@dataclasses.dataclass(frozen=True)
class SynthSpec:
    """What to generate: a shape's routing topology, the statistics, and the step structure."""

    model: str  # e.g. "Qwen3-30B-A3B"
    model_type: str
    num_layers: int
    num_experts: int
    top_k: int
    carry_over: float
    popularity: Popularity
    requests: int = 8
    prompt: int = 512
    tokens: int = 128
    seed: int = 0


def synthesize(spec: SynthSpec) -> Trace:
    """Batch-1 requests one after another: each a prefill step of `prompt` rows, then `tokens` decode steps."""
    shares = spec.popularity.shares(spec.num_experts)
    bias_by_rank, rho = calibrate(tuple(shares.tolist()), spec.top_k, spec.carry_over)
    rng = np.random.default_rng(spec.seed)
    bias = np.stack([bias_by_rank[rng.permutation(spec.num_experts)] for _ in range(spec.num_layers)])  # [L, E]
    shape = (spec.requests, spec.num_layers, spec.num_experts)
    z = rng.standard_normal(shape)
    rows = []  # per position: [R, L, K]
    for position in range(spec.prompt + spec.tokens):
        if position:
            z = rho * z + np.sqrt(1 - rho * rho) * rng.standard_normal(shape)
        rows.append(top_k(bias + z, spec.top_k))
    ids = np.stack(rows, axis=1).reshape(-1, spec.num_layers, spec.top_k)  # request-major: [R x positions, L, K]
    steps_per_request = [True] + [False] * spec.tokens
    law = spec.popularity
    notes = {"generator": "wisp trace synth", "carry_over": spec.carry_over, "popularity_skew": round(law.skew, 5),
             "popularity_cutoff": None if np.isinf(law.cutoff) else round(law.cutoff, 4),
             "expected_cover90": round(cover(shares), 2), "expected_top_share": round(float(shares[0]), 4),
             "rho": round(rho, 5), "requests": spec.requests, "prompt": spec.prompt, "tokens": spec.tokens,
             "seed": spec.seed, "model": "top-k of bias + AR(1) Gaussian noise per request (engine/traces/synth.py)"}
    header = TraceHeader(spec.model, spec.model_type, spec.num_layers, spec.num_experts, spec.top_k, "synthetic",
                         notes)
    return Trace(header=header,
                 is_prefill=np.array(steps_per_request * spec.requests, dtype=bool),
                 num_tokens=np.array(([spec.prompt] + [1] * spec.tokens) * spec.requests, dtype=np.int32),
                 expert_ids=ids.astype(ids_dtype(spec.num_experts)),
                 seq_ids=np.repeat(np.arange(spec.requests, dtype=np.int32), spec.prompt + spec.tokens))


def spec_for_shape(shape: str, carry_over: float | None = None, skew: float | None = None,
                   cover90: int | None = None, top_share: float | None = None, **structure) -> SynthSpec:
    """A benchmark shape's routing topology (engine.model.shapes) with the published statistics as defaults.
    `skew` alone states a pure Zipf law; otherwise `cover90` and `top_share` state the law with a cutoff."""
    from engine.model.shapes import SHAPES

    args = SHAPES[shape]
    published = PUBLISHED.get(shape, {})
    if carry_over is None:
        carry_over = published.get("carry_over")
        if carry_over is None:
            raise SynthError(f"no published carry-over for {shape}: pass --carry-over")
    if skew is not None:
        if cover90 is not None or top_share is not None:
            raise SynthError("state popularity either as --popularity-skew or as --cover90 and --top-share")
        if skew < 0:
            raise SynthError(f"--popularity-skew {skew} must be at least 0 (0 = uniform popularity)")
        law = Popularity(skew)
    else:
        cover90 = published.get("cover90") if cover90 is None else cover90
        top_share = published.get("top_share") if top_share is None else top_share
        if cover90 is None or top_share is None:
            raise SynthError(f"no published popularity for {shape}: pass --popularity-skew, "
                             "or --cover90 and --top-share")
        law = fit_popularity(args.num_experts, cover90, top_share)
    if not 0 <= carry_over <= 1:
        raise SynthError(f"--carry-over {carry_over} is not a share between 0 and 1")
    return SynthSpec(model=published.get("model", shape), model_type=args.model_type,
                     num_layers=args.num_moe_layers, num_experts=args.num_experts, top_k=args.num_experts_per_tok,
                     carry_over=carry_over, popularity=law, **structure)
