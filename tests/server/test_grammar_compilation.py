"""Grammars are compiled off the engine thread: on worker threads, once per grammar text, within a time and a
size budget (a request over it fails alone), and a stream keeps its pace while a big schema compiles."""

import json
import threading
import time

import pytest

from engine.errors import RequestError
from engine.generation.compiled_grammars import CompileBudget, CompiledGrammars


class SlowCompiler:
    def __init__(self, seconds: float = 0.0):
        self.seconds, self.calls, self.threads = seconds, [], set()

    def __call__(self, grammar: str, field: str):
        self.calls.append(grammar)
        self.threads.add(threading.current_thread().name)
        time.sleep(self.seconds)
        if grammar == "bad":
            raise RequestError("the JSON schema is not usable: bad", field)
        return f"compiled {grammar}"


def test_each_grammar_text_compiles_once_on_a_worker():
    compiler = SlowCompiler(0.05)
    grammars = CompiledGrammars(compiler)
    results = []
    threads = [threading.Thread(target=lambda: results.append(grammars.get("g", "json_schema"))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == ["compiled g"] * 4 and grammars.get("g", "json_schema") == "compiled g"
    assert compiler.calls == ["g"] and all(name.startswith("wisp-grammar") for name in compiler.threads)


def test_an_unusable_grammar_is_its_requests_error_every_time_without_compiling_again():
    compiler = SlowCompiler()
    grammars = CompiledGrammars(compiler)
    for _ in range(2):
        with pytest.raises(RequestError, match="not usable"):
            grammars.get("bad", "json_schema")
    assert compiler.calls == ["bad"]


def test_a_grammar_over_the_time_budget_fails_alone():
    grammars = CompiledGrammars(SlowCompiler(1.0), CompileBudget(max_seconds=0.1))
    started = time.monotonic()
    with pytest.raises(RequestError, match="did not compile within 0.1 s") as caught:
        grammars.get("slow", "tools")
    assert time.monotonic() - started < 0.5 and caught.value.field == "tools"


def test_a_grammar_over_the_size_budget_is_refused_before_it_compiles():
    compiler = SlowCompiler()
    with pytest.raises(RequestError, match="more than this server compiles"):
        CompiledGrammars(compiler, CompileBudget(max_chars=10)).get("x" * 11, "json_schema")
    assert compiler.calls == []


def test_too_many_grammars_compiling_at_once_are_refused():
    grammars = CompiledGrammars(SlowCompiler(0.5), CompileBudget(max_seconds=0.01, max_compiling=2))
    for name in ("a", "b"):
        with pytest.raises(RequestError, match="did not compile"):
            grammars.get(name, "json_schema")
    with pytest.raises(RequestError, match="compiling already"):
        grammars.get("c", "json_schema")


def test_old_grammars_leave_the_cache():
    compiler = SlowCompiler()
    grammars = CompiledGrammars(compiler, CompileBudget(max_cached=2))
    for name in ("a", "b", "c", "a"):
        grammars.get(name, "json_schema")
    assert compiler.calls == ["a", "b", "c", "a"]


@pytest.mark.slow
def test_a_stream_keeps_its_pace_while_a_big_schema_compiles(demo_engine):
    pytest.importorskip("llguidance")
    from engine.api import GenerateRequest, SamplingParams
    from engine.events import FinishEvent, TokenEvent

    def big_schema(tag: str) -> str:  # ~50,000 strings, unique per call: never in the cache
        return json.dumps({"type": "object", "properties": {"pick": {"enum": [f"{tag}{n}x" for n in range(50_000)]}},
                           "required": ["pick"]})

    stream = demo_engine.submit(GenerateRequest(prompt="Once upon a time", sampling=SamplingParams(
        max_tokens=2000, ignore_eos=True)))
    times, finishes = [], []
    for event in stream:
        if not isinstance(event, TokenEvent):
            break
        times.append(time.monotonic())
        if len(times) in (10, 30):
            sampling = SamplingParams(max_tokens=4, json_schema=big_schema(f"t{len(times)}-"))
            demo_engine.submit(GenerateRequest(prompt="Pick one:", sampling=sampling),
                               lambda event: finishes.append(event) if isinstance(event, FinishEvent) else None)
        if len(finishes) == 2 and len(times) > 40:
            demo_engine.cancel(stream.request_id)  # both schemas compiled and answered while the stream ran
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    for finish in finishes:  # answered, or (on a machine too busy to compile it in time) refused alone
        assert finish.reason == "length" or "did not compile within" in finish.error, finish.error
    worst = max(range(5, len(gaps)), key=gaps.__getitem__)
    assert gaps[worst] < 0.3, f"the stream stalled {gaps[worst]:.2f} s after token {worst + 1} of {len(times)}"
