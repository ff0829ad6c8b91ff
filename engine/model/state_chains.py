"""Where each row of a static-shape decode step reads and writes its sequence's fixed-size states (the hybrid
models' state layers). A plain decode step's row is its sequence's only row: it reads and writes the sequence's
state slot. A verify step gives a sequence one row per position (its last token, then its drafts), and those rows
form a chain: row j reads the states row j-1 wrote, row 0 the slot's; every row but the last writes into a scratch
row of the state cache (HybridCache.num_verify_rows), where HybridCache.roll_back finds the states after the last
accepted position, and the last row writes the slot, so a step whose drafts are all accepted leaves the slot done."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StateChains:
    slots: list[int]  # [rows] the state slot of each row's sequence
    sources: list[int]  # [rows] the state row each row reads
    targets: list[int]  # [rows] the state row each row writes
    lengths: list[int]  # [rows] at a sequence's first row its number of rows, 0 at the rows after it

    @property
    def is_chained(self) -> bool:
        return any(length > 1 for length in self.lengths)


def unchained(state_slots: list[int]) -> StateChains:
    """One row per sequence: each reads and writes its own slot (-1 where the model keeps no state)."""
    return StateChains(list(state_slots), list(state_slots), list(state_slots), [1] * len(state_slots))


def chained(sequences: list[tuple[int, int]], first_scratch_row: int) -> tuple[StateChains, dict[int, list[int]]]:
    """sequences: (state slot, number of rows) in step order -> (the chains, {slot: the state row after each of its
    rows} for each sequence of more than one row). Scratch rows are numbered from first_scratch_row on."""
    slots, sources, targets, lengths, kept = [], [], [], [], {}
    scratch = first_scratch_row
    for slot, num_rows in sequences:
        rows = list(range(scratch, scratch + num_rows - 1)) + [slot]
        scratch += num_rows - 1
        slots += [slot] * num_rows
        sources += [slot] + rows[:-1]
        targets += rows
        lengths += [num_rows] + [0] * (num_rows - 1)
        if num_rows > 1:
            kept[slot] = rows
    return StateChains(slots, sources, targets, lengths), kept
