"""Compiled grammars, kept by their text: compiled on worker threads within a time and size budget, so neither
the engine thread nor the thread that waits pays for a big schema twice, and a grammar over budget fails its
own request alone (a RequestError: 400 naming the field)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Callable

from engine.errors import RequestError



@dataclass(frozen=True)
class CompileBudget:
    max_seconds: float = 10.0  # a request waits this long for its grammar, then fails alone
    max_chars: int = 2_000_000  # the grammar's text (a 50,000-string enum is ~0.6 MB)
    max_cached: int = 64  # compiled grammars kept (least recently used dropped first)
    max_compiling: int = 4  # grammars being compiled or waiting for a worker at once
    num_workers: int = 1  # compiling takes a whole core: one, so that a small machine keeps one for the engine


class CompiledGrammars:
    """grammar text -> compiled matcher (llguidance's, at the start of its grammar; callers deep_copy it).
    Any thread; compilation runs on this object's workers."""

    def __init__(self, compile_grammar: Callable[[str, str], object], budget: CompileBudget = CompileBudget()):
        self.compile_grammar, self.budget = compile_grammar, budget
        self._futures: OrderedDict[str, Future] = OrderedDict()
        self._lock = threading.Lock()
        # the usual priority, not nice: see the note at the end of this module
        self._pool = ThreadPoolExecutor(budget.num_workers, thread_name_prefix="wisp-grammar")

    def get(self, grammar: str, field: str):
        """The compiled grammar, compiled now (on a worker) or earlier; RequestError if it cannot be compiled
        or is over budget. The same text asked for twice at once is compiled once. `grammar` is whatever text
        `compile_grammar` builds the grammar from (a JSON schema, say)."""
        if len(grammar) > self.budget.max_chars:
            raise RequestError(f"the grammar for {field} is {len(grammar):,} characters, more than this server "
                               f"compiles ({self.budget.max_chars:,}): send a smaller schema", field)
        future = self._future(grammar, field)
        try:
            return future.result(timeout=self.budget.max_seconds)
        except FutureTimeout:
            raise RequestError(f"the grammar for {field} did not compile within {self.budget.max_seconds:g} s: "
                               "send a smaller schema (fewer enum values, less nesting)", field) from None

    def _future(self, grammar: str, field: str) -> Future:
        with self._lock:
            future = self._futures.get(grammar)
            if future is not None:
                self._futures.move_to_end(grammar)
                return future
            if sum(not f.done() for f in self._futures.values()) >= self.budget.max_compiling:
                raise RequestError(f"{self.budget.max_compiling} grammars are compiling already: retry shortly",
                                   field)
            future = self._pool.submit(self.compile_grammar, grammar, field)
            self._futures[grammar] = future
            self._drop_oldest()
            return future

    def _drop_oldest(self) -> None:
        finished = [text for text, future in self._futures.items() if future.done()]
        for text in finished[: max(len(self._futures) - self.budget.max_cached, 0)]:
            del self._futures[text]


# Why not a lower priority (nice 10) for the workers: the compile's Python parts (reading and checking the
# schema) hold the GIL, and a busy machine leaves a niced thread unscheduled while it holds it, so the engine
# thread waited for it: streams stalled 0.5-1.3 s while a 50,000-value schema compiled (at the usual priority,
# none over 0.3 s on the same machine).
