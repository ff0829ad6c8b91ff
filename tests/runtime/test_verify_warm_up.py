"""The speculative benchmark's warm-up runs one verify step of every row count before its timed runs, so no timed
run captures graphs, and leaves the draft length rule, the counters and the stated acceptance as they were."""

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.bench.verify_warm_up import warm_verify_rows
from engine.generation.speculative.replay import AcceptanceReplay


def test_every_verify_row_count_runs_once_and_the_rule_is_untouched(tiny_model_dir):
    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu", decode="static",
                              speculative="ngram", draft_tokens=4)) as engine:
        core = engine._core
        speculation = core.speculation
        speculation.replay, speculation.vocab_size = AcceptanceReplay(0.6), core.runner.model.args.vocab_size
        kept = speculation.draft_length, speculation.counters

        def decode(tokens: int):
            return engine.generate(GenerateRequest(prompt="one two three",
                                                   sampling=SamplingParams(max_tokens=tokens, ignore_eos=True)))

        warm_verify_rows(core, decode, 4)
        assert set(core.runner.padded_decode.by_batch) >= {2, 3, 4, 5}
        assert speculation.draft_length is kept[0] and speculation.counters is kept[1]
        assert kept[1].num_verify_steps == 0
        assert speculation.replay.rate == 0.6 and "propose" not in vars(speculation)
