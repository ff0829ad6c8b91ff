"""A step and time budget for rendering a chat template. Templates are untrusted code from model folders: the
sandbox keeps them from reaching Python, this keeps `{% for i in range(100000) %}{% for j in range(100000) %}`
from holding a thread for hours. Every item a template's range() hands out and every piece of text it writes
is a step; past MAX_STEPS or MAX_SECONDS the render stops with TemplateBudgetError."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import jinja2
from jinja2.sandbox import MAX_RANGE

MAX_STEPS = 2_000_000  # the largest real templates take a few thousand
MAX_SECONDS = 10.0
MAX_PRODUCT_ITEMS = 1_000_000  # "x" * n and [..] * n in a template
MAX_EXPONENT = 1024
CHECK_TIME_EVERY = 4096


class TemplateBudgetError(jinja2.TemplateError):
    """The template ran past its step or time budget."""


class RenderBudget:
    def __init__(self):
        self.steps = 0
        self.deadline = time.monotonic() + MAX_SECONDS

    def spend(self) -> None:
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TemplateBudgetError(f"it ran more than {MAX_STEPS:,} steps")
        if self.steps % CHECK_TIME_EVERY == 0 and time.monotonic() > self.deadline:
            raise TemplateBudgetError(f"it ran longer than {MAX_SECONDS:.0f} s")


_BUDGET: contextvars.ContextVar[RenderBudget | None] = contextvars.ContextVar("chat_template_budget", default=None)


@contextmanager
def render_budget() -> Iterator[RenderBudget]:
    """The budget of one render on this thread."""
    budget = RenderBudget()
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


def spend() -> None:
    budget = _BUDGET.get()
    if budget is not None:
        budget.spend()


def counted(pieces: Iterable[str]) -> str:
    """Join a template's output pieces, one step each."""
    out = []
    for piece in pieces:
        spend()
        out.append(piece)
    return "".join(out)


class CountedRange:
    """A range whose items are steps when iterated (len and indexing as a range's)."""

    def __init__(self, items: range):
        self._range = items

    def __iter__(self) -> Iterator[int]:
        for item in self._range:
            spend()
            yield item

    def __reversed__(self) -> Iterator[int]:
        return iter(CountedRange(self._range[::-1]))

    def __len__(self) -> int:
        return len(self._range)

    def __getitem__(self, index):
        return self._range[index]


def bounded_range(*args) -> CountedRange:
    """range() for templates: at most jinja's sandbox MAX_RANGE items, each a step."""
    items = range(*args)
    if len(items) > MAX_RANGE:
        raise TemplateBudgetError(f"range() is limited to {MAX_RANGE} items in a chat template")
    return CountedRange(items)


def check_binary_operation(operator: str, left, right) -> None:
    """Refuse `*` that would build a huge string or list and `**` with a huge exponent."""
    if operator == "*":
        for sequence, count in ((left, right), (right, left)):
            if isinstance(sequence, (str, list, tuple)) and isinstance(count, int) \
                    and len(sequence) * count > MAX_PRODUCT_ITEMS:
                raise TemplateBudgetError(f"it multiplies a sequence past {MAX_PRODUCT_ITEMS:,} items")
    if operator == "**" and isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT:
        raise TemplateBudgetError(f"it raises to a power above {MAX_EXPONENT}")
