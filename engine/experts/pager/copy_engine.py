"""Host->device expert copies: a side CUDA stream (so misses copy while hits compute), copy-time accounting
from CUDA events, and the events that make a layer wait for experts prefetched into it."""

from __future__ import annotations

import time

import torch

from engine.experts.counters import ExpertCounters


class CopyEngine:
    def __init__(self, device: torch.device, counters: ExpertCounters):
        self.counters = counters
        self.stream = torch.cuda.Stream(device) if device.type == "cuda" else None
        self.last_event = None
        self.timings: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self.prefetch_events: dict[int, object] = {}
        self.prefetched: dict[int, set[int]] = {}
        self.pace = None  # engine.experts.pager.link_pace.LinkPace: copies paced to a slower link (benchmarks)

    def copy(self, pairs: list[tuple[torch.Tensor, torch.Tensor]], after=None) -> None:
        """Start copying each (device slot, host block) pair; wait() before using the slots. The copies wait for
        the compute stream's work queued so far (slots being overwritten may still be read), or, given `after`
        (an event on the compute stream after the targets' last reader), only for that."""
        nbytes = sum(src.numel() * src.element_size() for _, src in pairs)
        self.counters.h2d_bytes += nbytes
        self.counters.timed_bytes += nbytes
        if self.stream is None:
            start = time.perf_counter()
            for dst, src in pairs:
                dst.copy_(src)
            self.counters.copy_s += time.perf_counter() - start
            return
        self.settle()
        if after is None:
            self.stream.wait_stream(torch.cuda.current_stream())
        else:
            self.stream.wait_event(after)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.stream):
            start.record()
            if self.pace is not None:
                self.pace.begin()
            for dst, src in pairs:
                dst.copy_(src, non_blocking=True)
            if self.pace is not None:
                self.pace.after_bytes(nbytes)
            end.record()
        self.last_event = end
        self.timings.append((start, end))

    def wait(self) -> None:
        """Make the compute stream wait for every copy started so far."""
        if self.stream is not None and self.last_event is not None:
            torch.cuda.current_stream().wait_event(self.last_event)

    def wait_for(self, event) -> None:
        """Make the compute stream wait for the copies up to `event` (a last_event; None: nothing to wait for)."""
        if self.stream is not None and event is not None:
            torch.cuda.current_stream().wait_event(event)

    def mark_prefetch(self, layer: int, experts: list[int]) -> None:
        self.prefetch_events[layer] = self.last_event
        self.prefetched[layer] = set(experts)

    def wait_prefetch(self, layer: int) -> None:
        event = self.prefetch_events.pop(layer, None)
        if event is not None:
            torch.cuda.current_stream().wait_event(event)

    def take_prefetched(self, layer: int, hits: list[int]) -> int:
        """How many of the layer's prefetched experts this step used."""
        return len(self.prefetched.pop(layer, set()) & set(hits))

    def settle(self) -> None:
        """Add the copy time of finished copies to the counters (never blocks)."""
        while self.timings and self.timings[0][1].query():
            start, end = self.timings.pop(0)
            self.counters.copy_s += start.elapsed_time(end) / 1000.0

    def synchronize(self) -> None:
        if self.stream is not None:
            self.stream.synchronize()
            self.settle()
