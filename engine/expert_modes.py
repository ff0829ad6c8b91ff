"""Where a model's routed experts live: the expert modes, one registry for the planner, the providers, the
CLI, the server and the app (through engine.api). Torch-free. docs/design.md explains each mode. The first
three are what a user chooses (`--experts`); the other backends' plans name who placed the model instead.

ExpertMode is a str enum: its members compare equal to their CLI/API spelling ("resident", "paged",
"static") and print as it, so `--experts paged` and `EngineOptions(experts="paged")` keep working."""

from __future__ import annotations

from enum import Enum

from engine.errors import RequestError


class ExpertMode(str, Enum):
    RESIDENT = "resident"  # every expert on the device
    PAGED = "paged"  # WiSP: a working set of expert slots on the device, misses paged in from the host
    STATIC = "static"  # vLLM --cpu-offload-gb: the first MoE layers stream from the host every forward
    LLAMA_CPP = "llama.cpp"  # plans only: llama.cpp placed the model itself (--n-gpu-layers, --n-cpu-moe)
    REMOTE = "remote"  # plans only: a remote server manages its own memory

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def parse(cls, text: str | ExpertMode) -> ExpertMode:
        """The mode a user's spelling names (one Wisp's engine runs); a RequestError lists them otherwise."""
        if text not in names():
            raise RequestError(f"experts must be one of {', '.join(names())}, got '{text}'")
        return cls(text)

    @property
    def keeps_experts_on_host(self) -> bool:
        """Whether the host holds the experts (the device at most a part of them)."""
        return self is not ExpertMode.RESIDENT

    @property
    def can_resplit(self) -> bool:
        """Whether the expert/KV split may change while the model runs (the slider, the online controller)."""
        return self is ExpertMode.PAGED


USER_MODES = (ExpertMode.RESIDENT, ExpertMode.PAGED, ExpertMode.STATIC)  # what Wisp's engine runs


def names() -> tuple[str, ...]:
    """The modes a user chooses from, as the CLI and the API spell them."""
    return tuple(mode.value for mode in USER_MODES)
