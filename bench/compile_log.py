"""Triton kernel compiles, by kernel name, while a block runs: a benchmark phase that compiles a new
specialization (a new shape or alignment after a re-split) pays for it in its wall time. Counted through
Triton's post-compile hook (knobs.runtime.jit_post_compile_hook); where Triton or the hook is missing, or
kernels run in Triton's interpreter, nothing is counted."""

from __future__ import annotations


class TritonCompiles:
    def __init__(self):
        self.names: list[str] = []
        self._runtime = None
        self._previous = None

    def __enter__(self) -> TritonCompiles:
        try:
            from triton import knobs
        except ImportError:
            return self
        runtime = getattr(knobs, "runtime", None)
        if runtime is None or not hasattr(runtime, "jit_post_compile_hook"):
            return self
        self._runtime, self._previous = runtime, runtime.jit_post_compile_hook
        runtime.jit_post_compile_hook = self._record
        return self

    def _record(self, *, fn, **_) -> None:
        self.names.append(fn.name)
        if self._previous is not None:
            self._previous(fn=fn, **_)

    def __exit__(self, *exc) -> None:
        if self._runtime is not None:
            self._runtime.jit_post_compile_hook = self._previous
            self._runtime = None
