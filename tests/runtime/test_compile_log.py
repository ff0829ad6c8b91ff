"""bench.compile_log: Triton compiles counted through Triton's post-compile hook, the previous hook kept."""

from types import SimpleNamespace

from bench.compile_log import TritonCompiles


def test_compiles_are_recorded_by_name_and_the_previous_hook_is_chained_and_restored():
    from triton import knobs  # the test extra installs Triton (its interpreter runs the GPU kernels on the CPU)

    seen = []
    previous = knobs.runtime.jit_post_compile_hook
    knobs.runtime.jit_post_compile_hook = lambda **kwargs: seen.append(kwargs["fn"].name)
    try:
        outer = knobs.runtime.jit_post_compile_hook
        with TritonCompiles() as compiles:
            hook = knobs.runtime.jit_post_compile_hook
            assert hook is not outer
            hook(fn=SimpleNamespace(name="lru_step"), key=None, repr="", compile={}, is_manual_warmup=False,
                 already_compiled=False)
        assert compiles.names == ["lru_step"] and seen == ["lru_step"]
        assert knobs.runtime.jit_post_compile_hook is outer
    finally:
        knobs.runtime.jit_post_compile_hook = previous


def test_graph_captures_survive_the_graphs_being_dropped():
    from engine.runtime.decode_graphs import DecodeGraphs

    graphs = DecodeGraphs.__new__(DecodeGraphs)  # the counters only: no model or cache needed
    graphs.by_batch, graphs._dropped = {1: SimpleNamespace(captures=2, capture_s=0.5)}, (0, 0.0)
    graphs.invalidate()  # a re-split drops every batch size's graphs
    graphs.by_batch[4] = SimpleNamespace(captures=1, capture_s=0.25)
    assert graphs.capture_totals() == (3, 0.75)
