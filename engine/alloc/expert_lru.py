"""Which experts of one layer sit in which device slots, in least-recently-used order (torch-free).

The step rule matches engine.alloc.miss_curve: the experts a step needs are touched in order of first
appearance; a miss evicts the least recently used resident expert that this step does not need."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class Placement:
    expert: int
    slot: int
    evicted: int | None  # the expert that held the slot before, if any


class ExpertLRU:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.slots: OrderedDict[int, int] = OrderedDict()  # expert -> slot, oldest first

    def __contains__(self, expert: int) -> bool:
        return expert in self.slots

    def slot_of(self, expert: int) -> int:
        return self.slots[expert]

    def split(self, needed) -> tuple[list[int], list[int]]:
        """-> (resident experts, missing experts), each in the order given."""
        hits = [e for e in needed if e in self.slots]
        return hits, [e for e in needed if e not in self.slots]

    def place(self, expert: int, keep: set[int], take_free_slot) -> Placement | None:
        """Make `expert` resident: a free slot while under capacity, else the LRU victim outside `keep`.
        Returns None when every resident expert is in `keep` and the layer is at capacity."""
        if len(self.slots) < self.capacity:
            slot = take_free_slot()
            if slot is not None:
                self.slots[expert] = slot
                return Placement(expert, slot, None)
        victim = next((e for e in self.slots if e not in keep), None)
        if victim is None:
            return None
        slot = self.slots.pop(victim)
        self.slots[expert] = slot
        return Placement(expert, slot, victim)

    def touch(self, experts) -> None:
        for expert in experts:
            if expert in self.slots:
                self.slots.move_to_end(expert)

    def demote(self, experts) -> None:
        """Make `experts` (resident ones) the least recently used, in the order given (the first is evicted first)."""
        for expert in reversed(list(experts)):
            if expert in self.slots:
                self.slots.move_to_end(expert, last=False)

    def working_set(self, share: float) -> set[int]:
        """The most recently used experts, at most `share` of the capacity."""
        count = int(self.capacity * share)
        return set(list(self.slots)[-count:]) if count else set()

    def shrink_to(self, capacity: int) -> None:
        """Lower the capacity, forgetting the least recently used experts that no longer fit."""
        self.capacity = capacity
        while len(self.slots) > capacity:
            self.slots.popitem(last=False)
