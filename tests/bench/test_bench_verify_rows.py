"""The bench's plans count the scratch state rows its engines hold for a hybrid's static verify steps, as the
engine's own plan does (engine.config.EngineOptions.verify_state_rows): a speculative row's peak stays within its
budget."""

from types import SimpleNamespace

from engine.alloc.memory_plan import GiB
from engine.bench.suite import shape_plan, verify_rows
from engine.config import EngineOptions
from engine.model.shapes import shape
from engine.model.sizes import model_sizes


def bench_args(speculative: str, batch: int = 1, draft_tokens: int = 8):
    return SimpleNamespace(batch=batch, speculative=speculative, draft_tokens=draft_tokens)


def test_verify_rows_are_the_engines():
    for speculative, batch, draft_tokens in [("off", 1, 8), ("ngram", 1, 8), ("mtp", 4, 2), ("mtp", 16, 4)]:
        expected = EngineOptions(max_num_seqs=batch, draft_tokens=draft_tokens, speculative=speculative)
        assert verify_rows(bench_args(speculative, batch, draft_tokens)) == expected.verify_state_rows


def test_a_speculative_plan_of_a_hybrid_holds_its_scratch_states():
    args = shape("qwen3.5-35b-a3b")
    per_row = model_sizes(args, 2).verify_state_bytes_per_row
    assert per_row > 0
    off, mtp = (shape_plan(args, "paged", 12 * GiB, None, 1, 1024, verify_rows=verify_rows(bench_args(spec)))
                for spec in ("off", "mtp"))
    assert mtp.state_bytes - off.state_bytes == 8 * per_row
    assert mtp.kv_blocks < off.kv_blocks  # the budget is the same: the rows come out of the pool
