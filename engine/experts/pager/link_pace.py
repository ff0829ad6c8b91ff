"""A slower host->device link emulated on a fast one (`wisp bench --link-gbps N`): every expert copy the pager
starts is followed, on the same stream, by a one-program kernel that spins on the GPU's global timer until the
copy's bytes would have crossed an N GB/s link since the copy began. The step then runs as it would behind that
link: copies that overlap compute still overlap it, and the pager's hits, misses and bytes are the real ones.

What it cannot show: a desktop GPU's memory bandwidth and compute (every kernel still runs at the H200's speed),
the host's DDR speed and the PCIe latency of small reads (the copy itself still runs at the fast link's rate and
only waits afterwards), and the spin program's SM (one of the GPU's SMs is busy for the wait). A copy slower than
N GB/s on its own is not slowed further."""

from __future__ import annotations

import torch

_built: dict = {}


def _kernels():
    if "kernels" in _built:
        return _built["kernels"]
    import triton
    import triton.language as tl

    @triton.jit
    def now_ns():
        return tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                         pack=1)

    @triton.jit
    def stamp(mark_ptr):
        tl.store(mark_ptr, now_ns())

    @triton.jit(do_not_specialize=["count", "row_bytes", "ps_per_byte"])
    def wait(mark_ptr, ids_ptr, count, row_bytes, ps_per_byte, BLOCK: tl.constexpr, COUNT_IDS: tl.constexpr):
        """Spin until mark + bytes x ps_per_byte / 1000 ns: bytes = row_bytes x (entries of ids >= 0) when
        COUNT_IDS (a graphed step's misses), else row_bytes."""
        nbytes = row_bytes.to(tl.int64)
        if COUNT_IDS:
            ids = tl.load(ids_ptr + tl.arange(0, BLOCK), mask=tl.arange(0, BLOCK) < count, other=-1)
            nbytes = nbytes * tl.sum((ids >= 0).to(tl.int64), axis=0)
        until = tl.load(mark_ptr) + nbytes * ps_per_byte // 1000
        now = now_ns()
        while now < until:
            now = now_ns()

    _built["kernels"] = stamp, wait
    return stamp, wait


class LinkPace:
    """Paces the copies of one engine to gbps (1e9 bytes per second) on a CUDA device."""

    def __init__(self, gbps: float, device: torch.device):
        if gbps <= 0:
            raise ValueError(f"a link rate must be positive, got {gbps} GB/s")
        if device.type != "cuda":
            raise ValueError("pacing host->device copies needs a CUDA device")
        self.gbps = gbps
        self.ps_per_byte = round(1000 / gbps)  # picoseconds per byte: 25 GB/s is 40
        self.mark = torch.zeros(1, dtype=torch.int64, device=device)

    def begin(self) -> None:
        """On the current stream, before the copies: the time they start."""
        _kernels()[0][(1,)](self.mark, num_warps=1)

    def after_bytes(self, nbytes: int) -> None:
        """On the current stream, after copies of nbytes: wait until they would have arrived."""
        _kernels()[1][(1,)](self.mark, self.mark, 0, nbytes, self.ps_per_byte, BLOCK=1, COUNT_IDS=False,
                            num_warps=1)

    def after_rows(self, ids: torch.Tensor, row_bytes: int) -> None:
        """After a graphed step's miss copies: row_bytes for each entry of ids that is >= 0 (read on the GPU)."""
        import triton

        _kernels()[1][(1,)](self.mark, ids, ids.numel(), row_bytes, self.ps_per_byte,
                            BLOCK=triton.next_power_of_2(max(ids.numel(), 16)), COUNT_IDS=True, num_warps=1)
