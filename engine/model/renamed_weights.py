"""Checkpoint names of a family whose dense modules are named otherwise than Wisp's (engine.model.weight_names):
the shared mapping, then the family's renames."""

from __future__ import annotations

from dataclasses import dataclass

from engine.model.weight_names import MoeWeightNames


@dataclass(frozen=True)
class RenamedWeightNames(MoeWeightNames):
    renames: tuple[tuple[str, str], ...] = ()  # (substring of the shared mapping's name, the checkpoint's), in order

    def checkpoint_name(self, param: str) -> str:
        name = super().checkpoint_name(param)
        for ours, theirs in self.renames:
            name = name.replace(ours, theirs)
        return name
