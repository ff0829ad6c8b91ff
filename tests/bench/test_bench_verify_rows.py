"""The bench's plans count the scratch state rows its engines hold for a hybrid's static verify steps, as the
engine's own plan does (engine.alloc.memory_plan.verify_state_rows): a speculative row's peak stays within its
budget, and the rows are those of the drafts a verify step can take (small_step_drafts), not --draft-tokens'."""

from types import SimpleNamespace

from engine.alloc.memory_plan import GiB, small_step_drafts
from engine.bench.suite import planned_drafts, shape_plan
from engine.config import EngineOptions
from engine.model.shapes import shape
from engine.model.sizes import model_sizes


def bench_args(speculative: str, batch: int = 1, draft_tokens: int = 8):
    return SimpleNamespace(batch=batch, speculative=speculative, draft_tokens=draft_tokens)


def test_planned_drafts_are_the_engines():
    for speculative, batch, draft_tokens in [("off", 1, 8), ("ngram", 1, 8), ("mtp", 4, 2), ("mtp", 16, 4)]:
        expected = EngineOptions(max_num_seqs=batch, draft_tokens=draft_tokens, speculative=speculative)
        assert planned_drafts(bench_args(speculative, batch, draft_tokens)) == expected.planned_draft_tokens
        assert expected.plan_request(4096).draft_tokens == (0 if speculative == "off" else draft_tokens)


def plans(args, batch: int = 1, expert_bytes: int | None = None):
    return [shape_plan(args, "paged", 12 * GiB, None, batch, 1024, expert_bytes,
                       draft_tokens=planned_drafts(bench_args(spec, batch))) for spec in ("off", "mtp")]


def test_a_speculative_plan_of_a_hybrid_holds_a_row_per_draft_a_verify_step_takes():
    args = shape("qwen3.5-35b-a3b")
    sizes = model_sizes(args, 2)
    per_row = sizes.verify_state_bytes_per_row
    assert per_row > 0
    for expert_bytes in (None, 3 * 2048 * 512 * 9 // 16):  # bf16 experts (5 drafts), Q4_K blocks (7 drafts)
        off, mtp = plans(args, expert_bytes=expert_bytes)
        drafts = small_step_drafts(8, args.num_experts_per_tok, expert_bytes or sizes.expert_bytes)
        assert drafts < 8
        assert (mtp.verify_state_rows, off.verify_state_rows) == (drafts, 0)
        assert mtp.state_bytes - off.state_bytes == drafts * per_row
        assert mtp.free_bytes >= 0  # the budget is the same: the rows come out of the slots and KV
        assert mtp.expert_device_bytes + mtp.kv_bytes < off.expert_device_bytes + off.kv_bytes
    off, mtp = plans(args, batch=12)  # a batch's static step has more rows than one sequence's drafts
    assert mtp.verify_state_rows == 11


def test_a_model_that_chains_no_states_plans_no_rows():
    off, mtp = plans(shape("qwen3-30b-a3b"))
    assert mtp.verify_state_rows == 0 and mtp.state_bytes == off.state_bytes
