"""Which kernels run the gated delta rule: the plain torch forms (engine.model.gated_deltanet, every device) or
fla's Triton kernels (engine.model.delta_rule_fla: CUDA with fla-core installed, the `hybrid` extra).

WISP_LINEAR_ATTENTION=fla|torch picks; DEFAULT_KERNELS when unset. "fla" falls back to torch on a device other
than CUDA or where fla does not import, and says why once. Every step of a process uses the same kernels, so
outputs stay bitwise identical across expert modes and batch compositions either way."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from functools import cache
from typing import Callable

from engine.model import gated_deltanet

ENV_VAR = "WISP_LINEAR_ATTENTION"
CHOICES = ("fla", "torch")
DEFAULT_KERNELS = "fla"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeltaRuleKernels:
    name: str
    chunked: Callable  # a prompt's tokens of one sequence (gated_deltanet.chunked's contract)
    recurrent_step: Callable  # one token of each of B sequences (gated_deltanet.recurrent_step's contract)


TORCH = DeltaRuleKernels("torch", gated_deltanet.chunked, gated_deltanet.recurrent_step)


def requested() -> str:
    choice = os.environ.get(ENV_VAR, DEFAULT_KERNELS).strip().lower() or DEFAULT_KERNELS
    if choice not in CHOICES:
        raise ValueError(f"{ENV_VAR}={choice!r}: expected one of {', '.join(CHOICES)}")
    return choice


def kernels_for(device_type: str) -> DeltaRuleKernels:
    """The kernels for tensors on `device_type` ("cuda", "cpu", ...) under the current WISP_LINEAR_ATTENTION."""
    return _kernels(requested(), device_type)


@cache
def _kernels(choice: str, device_type: str) -> DeltaRuleKernels:
    if choice == "torch":
        return TORCH
    if device_type != "cuda":
        return TORCH  # fla's kernels are Triton on CUDA; elsewhere the torch forms are the path
    try:
        from engine.model import delta_rule_fla
    except Exception as error:  # noqa: BLE001 - a missing or broken fla (or Triton) install means the torch path
        log.warning("%s=fla: fla does not import (%s: %s); the gated delta rule runs in torch (pip install -e "
                    "'.[hybrid]' installs fla-core)", ENV_VAR, type(error).__name__, error)
        return TORCH
    return DeltaRuleKernels("fla", delta_rule_fla.chunked, delta_rule_fla.recurrent_step)
