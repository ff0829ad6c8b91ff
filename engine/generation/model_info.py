"""What the app and CLI show about a loaded model, whichever backend runs it."""

from __future__ import annotations

from dataclasses import dataclass

from engine.alloc.memory_plan import MemoryPlan
from engine.config import DEFAULT_MAX_MODEL_LEN  # noqa: F401  (the backends' default context)


@dataclass(frozen=True)
class ModelInfo:
    """What the app and CLI show about a loaded model."""

    path: str
    name: str
    model_type: str
    num_layers: int
    num_experts: int
    top_k: int
    max_model_len: int
    device: str
    dtype: str
    has_chat_template: bool
    plan: MemoryPlan
    warnings: tuple[str, ...] = ()
    reasoning_effort: bool = False  # the chat template takes a reasoning effort (gpt-oss: low, medium, high)
    thinking_switch: bool = False  # the chat template takes enable_thinking (Qwen3: thinking on or off)
    tool_calls: bool = False  # the model takes tools and Wisp reads its calls (harmony or <tool_call> blocks)
    fill_in_middle: bool = False  # the tokenizer has FIM tokens: GenerateRequest.suffix works
    has_draft_layers: bool = False  # the checkpoint holds an MTP layer Wisp runs (--speculative mtp/auto)
