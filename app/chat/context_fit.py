"""What to do when a conversation outgrows the model's context (a per-chat policy, as LM Studio has): keep the
system prompt and drop the oldest turns, drop turns from the middle (the first turn stays), or stop and say so.
Pure Python: `count(messages)` says how many tokens a prompt of those messages has (system prompt and chat
template included), and the fit keeps whole turns, so a reply never loses the question it answered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

POLICIES = {
    "drop_oldest": "drop the oldest turns",
    "truncate_middle": "drop turns from the middle",
    "stop": "stop and say so",
}
DEFAULT_POLICY = "drop_oldest"  # the conversation keeps going


class ContextFullError(Exception):
    """The next turn cannot be sent: the message alone is too long, or the policy is to stop."""


@dataclass(frozen=True)
class ContextFit:
    kept: tuple[int, ...]  # indices of the history's messages that are sent
    num_tokens: int  # tokens of the prompt made of them
    dropped: tuple[int, int] | None = None  # [start, end) of the messages left out, if any

    @property
    def num_dropped(self) -> int:
        return 0 if self.dropped is None else self.dropped[1] - self.dropped[0]


def turn_starts(roles: Sequence[str]) -> list[int]:
    """Where each turn (a user message and the replies after it) begins."""
    return [i for i, role in enumerate(roles) if role == "user" and (i == 0 or roles[i - 1] != "user")]


def fit_context(roles: Sequence[str], count: Callable[[list[int]], int], limit: int, policy: str,
                hard_limit: int | None = None) -> ContextFit:
    """The messages to send so that the prompt has fewer than `limit` tokens (room left for the reply), or at
    least fewer than `hard_limit` (the context itself). The last turn (the message being answered) is always
    kept; raises ContextFullError when that cannot be done under `policy`."""
    hard_limit = hard_limit or limit
    everything = list(range(len(roles)))
    num_tokens = count(everything)
    if num_tokens < (hard_limit if policy == "stop" else limit):
        return ContextFit(tuple(everything), num_tokens)
    if policy == "stop":
        raise ContextFullError(f"the conversation has {num_tokens:,} tokens and the model's context holds "
                               f"{hard_limit:,}; start a new chat, or let this chat drop old turns")
    starts = turn_starts(roles)
    keeps_first = policy == "truncate_middle" and len(starts) > 2
    phases = [[(starts[1], starts[k]) for k in range(2, len(starts))]] if keeps_first else []
    phases.append([(0, starts[k]) for k in range(1, len(starts))])  # the oldest turns
    for bound in (limit, hard_limit):
        for candidates in phases:
            fit = _fewest_dropped(everything, candidates, count, bound)
            if fit is not None:
                return fit
    last = everything[starts[-1]:] if starts else everything
    raise ContextFullError(f"this message alone (with the system prompt and attached files) has {count(last):,} "
                           f"tokens and the model's context holds {hard_limit:,}; shorten it")


def _fewest_dropped(everything: list[int], candidates: list[tuple[int, int]], count, limit: int) -> ContextFit | None:
    """Binary search of the candidates (each drops more than the one before, so tokens only fall)."""
    low, high, best = 0, len(candidates) - 1, None
    while low <= high:
        middle = (low + high) // 2
        start, end = candidates[middle]
        kept = everything[:start] + everything[end:]
        num_tokens = count(kept)
        if num_tokens < limit:
            best, high = ContextFit(tuple(kept), num_tokens, (start, end)), middle - 1
        else:
            low = middle + 1
    return best
