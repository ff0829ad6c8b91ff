"""llguidance against xgrammar on a tokenizer.json: time to prepare the tokenizer and compile a JSON schema, CPU time
per token mask along a valid reply, and whether both engines allow every token of that reply and agree on how many
tokens each step allows.

    python bench/grammar_engines.py TOKENIZER_JSON [TOKENIZER_JSON ...]

xgrammar is not a Wisp dependency: install it (and apache-tvm-ffi) beside this run to compare."""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "age", "tags", "address"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
                         "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}},
                         "address": {"type": "object", "additionalProperties": False, "required": ["city", "zip"],
                                     "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}}}}
REPLY = ('{"name":"Ada Lovelace, Countess of Lovelace","age":36,"tags":["red","blue","green","red"],'
         '"address":{"city":"London","zip":"W1J 7NT"}}')


def run_llguidance(path: str, ids: list[int], vocab: int, eos: list[int]) -> dict:
    import llguidance

    start = time.perf_counter()
    tokenizer = llguidance.LLTokenizer(open(path, encoding="utf-8").read(), n_vocab=vocab, eos_token=eos)
    prepared = time.perf_counter()
    grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(SCHEMA), defaults={"whitespace_flexible": False})
    matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
    compiled = time.perf_counter()
    bitmask = np.zeros((vocab + 31) // 32, dtype=np.int32)

    def fill() -> np.ndarray:
        matcher.unsafe_compute_mask_ptr(bitmask.ctypes.data, bitmask.nbytes)
        return bitmask

    steps = walk(ids, fill, matcher.consume_token)
    return {"tokenizer_s": prepared - start, "compile_s": compiled - prepared, **steps}


def run_xgrammar(path: str, ids: list[int], vocab: int, eos: list[int]) -> dict:
    import torch
    import xgrammar
    from transformers import PreTrainedTokenizerFast

    start = time.perf_counter()
    info = xgrammar.TokenizerInfo.from_huggingface(PreTrainedTokenizerFast(tokenizer_file=path), vocab_size=vocab,
                                                   stop_token_ids=eos)
    compiler = xgrammar.GrammarCompiler(info)
    prepared = time.perf_counter()
    compiled_grammar = compiler.compile_json_schema(json.dumps(SCHEMA), any_whitespace=False,
                                                   separators=(",", ":"))
    matcher = xgrammar.GrammarMatcher(compiled_grammar)
    compiled = time.perf_counter()
    bitmask = xgrammar.allocate_token_bitmask(1, vocab)

    def fill() -> np.ndarray:
        matcher.fill_next_token_bitmask(bitmask)
        return bitmask[0].numpy()

    steps = walk(ids, fill, matcher.accept_token)
    del torch
    return {"tokenizer_s": prepared - start, "compile_s": compiled - prepared, **steps}


def walk(ids: list[int], fill, accept) -> dict:
    """Mask, check the reply's next token is allowed, accept it; time the masks."""
    times, allowed_counts, is_valid = [], [], True
    for token in ids:
        start = time.perf_counter()
        mask = fill()
        times.append(time.perf_counter() - start)
        bits = np.unpackbits(mask.view(np.uint8), bitorder="little")
        allowed_counts.append(int(bits.sum()))
        is_valid &= bool(bits[token])
        accept(token)
    return {"tokens": len(ids), "mask_us_median": float(np.median(times) * 1e6),
            "mask_us_p90": float(np.percentile(times, 90) * 1e6), "reply_allowed": is_valid,
            "allowed_counts": allowed_counts}


def main() -> None:
    from tokenizers import Tokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tokenizers", nargs="+")
    args = parser.parse_args()
    for path in args.tokenizers:
        tokenizer = Tokenizer.from_file(path)
        vocab = tokenizer.get_vocab_size(with_added_tokens=True)
        ids = tokenizer.encode(REPLY, add_special_tokens=False).ids
        eos = [0]
        results = {name: run(path, ids, vocab, eos) for name, run in (("llguidance", run_llguidance),
                                                                    ("xgrammar", run_xgrammar))}
        counts = [r.pop("allowed_counts") for r in results.values()]
        print(json.dumps({"tokenizer": path, "vocab": vocab, **results,
                          "same_allowed_counts": counts[0] == counts[1],
                          "steps_differing": sum(a != b for a, b in zip(*counts))}, indent=1))


if __name__ == "__main__":
    main()
