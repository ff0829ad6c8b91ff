"""DeepSeek-style routers (glm4_moe, deepseek_v2, deepseek_v3), op for op as transformers computes them.

Three `topk_method`s, Hugging Face's names:
- "noaux_tc" (DeepSeek-V3, GLM-4.5): sigmoid scores; a per-expert `e_score_correction_bias` added for the choice
  only; experts come from the `topk_group` best of `n_group` groups, a group scored by the sum of its best two;
  the weights are the unbiased scores, optionally renormalised, times `routed_scaling_factor`.
- "greedy" (DeepSeek-V2-Lite): softmax scores, plain top-k, times `routed_scaling_factor`.
- "group_limited_greedy" (DeepSeek-V2): softmax scores, top-k within the `topk_group` groups whose best expert
  scores highest, times `routed_scaling_factor`.
The two softmax methods never renormalise (transformers' DeepseekV2TopkRouter ignores norm_topk_prob).

Everything runs in fp32 from fp32 logits and the weights stay fp32 (the experts scale their outputs in fp32, as
transformers' expert loop does). No host sync: graphable.

Shapes: T tokens, E routed experts, G groups (n_group), K experts per token (top_k).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class GroupedRouting:
    """One model's router settings, named as its config.json names them."""

    num_experts: int
    top_k: int
    topk_method: str
    n_group: int = 1
    topk_group: int = 1
    norm_topk_prob: bool = False
    routed_scaling_factor: float = 1.0

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        """fp32 logits [T, E] -> scores [T, E] (sigmoid for noaux_tc, else softmax)."""
        if self.topk_method == "noaux_tc":
            return logits.sigmoid()
        return logits.softmax(dim=-1, dtype=torch.float32)

    def route(self, logits: torch.Tensor, bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """fp32 logits [T, E] (and noaux_tc's correction bias [E]) -> (ids [T, K] long, fp32 weights [T, K])."""
        scores = self.scores(logits)  # [T, E]
        if self.topk_method == "noaux_tc":
            choice = scores + bias
            if self.topk_group < self.n_group:
                choice = choice.masked_fill(~self.group_mask(self.top2_group_scores(choice)), float("-inf"))
            ids = torch.topk(choice, k=self.top_k, dim=-1, sorted=False)[1]
            return ids, self.finish(scores.gather(1, ids))
        if self.topk_method == "group_limited_greedy" and self.topk_group < self.n_group:
            scores = scores.masked_fill(~self.group_mask(self.grouped(scores).max(dim=-1).values), 0.0)
        weights, ids = torch.topk(scores, k=self.top_k, dim=-1, sorted=False)
        return ids, weights * self.routed_scaling_factor

    def weights_for(self, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """fp32 weights [T, K] of given ids [T, K] (trace-driven benchmarks choose the ids), computed as route()
        computes them for its own choice: bit for bit the same where the ids are route()'s."""
        weights = self.scores(logits).gather(1, ids)  # [T, K]
        if self.topk_method == "noaux_tc":
            return self.finish(weights)
        return weights * self.routed_scaling_factor

    def finish(self, weights: torch.Tensor) -> torch.Tensor:
        """noaux_tc's chosen scores [T, K] -> routing weights: renormalised (optionally), then scaled."""
        if self.norm_topk_prob:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        return weights * self.routed_scaling_factor

    def grouped(self, scores: torch.Tensor) -> torch.Tensor:
        """[T, E] -> [T, G, E/G]."""
        return scores.view(-1, self.n_group, scores.shape[-1] // self.n_group)

    def top2_group_scores(self, choice: torch.Tensor) -> torch.Tensor:
        """choice [T, E] -> [T, G]: each group scored by the sum of its two best experts."""
        return self.grouped(choice).topk(2, dim=-1)[0].sum(dim=-1)

    def group_mask(self, group_scores: torch.Tensor) -> torch.Tensor:
        """group_scores [T, G] -> bool [T, E]: True for the experts of each token's topk_group best groups.
        route() skips it where every group is kept, where the mask would change nothing."""
        group_idx = torch.topk(group_scores, k=self.topk_group, dim=-1, sorted=False)[1]  # [T, topk_group]
        group_mask = torch.zeros_like(group_scores)
        group_mask.scatter_(1, group_idx, 1)
        experts = group_mask.unsqueeze(-1).expand(-1, self.n_group, self.num_experts // self.n_group)  # [T, G, E/G]
        return experts.reshape(-1, self.num_experts).bool()
