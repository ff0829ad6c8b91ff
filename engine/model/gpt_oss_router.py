"""gpt-oss's router (transformers' GptOssTopKRouter): the top-k of the biased logits, then a softmax over those k
alone, in the logits' dtype. Ids come out largest logit first, as torch.topk orders them."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def route(router_logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """router_logits [T, E] -> (ids [T, K] long, weights [T, K] in the logits' dtype)."""
    top_values, ids = torch.topk(router_logits, top_k, dim=-1)  # [T, K]
    return ids, F.softmax(top_values, dim=1, dtype=top_values.dtype)


def weights_of(router_logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """The weights route() gives to given ids [T, K] (trace-driven routing picks the ids)."""
    values = router_logits.gather(1, ids)  # [T, K]
    return F.softmax(values, dim=1, dtype=values.dtype)
