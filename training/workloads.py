"""The prompts of the trace workloads, made from held-out corpus files (never trained on).

``python -m training.workloads --out resources/traces/workloads.json`` writes
{"code": [...], "chat": [...], "multi_turn": [...], "batched": [...]}: code prompts are a
function's signature and docstring opening (the model writes the body), chat prompts are
questions about held-out modules in the chat template, the multi-turn session alternates a
prose question and a code request, and the batched workload runs 2 code + 2 chat prompts at once.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
from pathlib import Path

from training import corpus
from training.chat_samples import CODE_QUESTIONS, PROSE_QUESTIONS, module_name, render_chat

NUM_PROMPTS = 4
NUM_TURNS = 6
MAX_PROMPT_CHARS = 600


def code_prompt(item: corpus.SourceFile, node: ast.FunctionDef) -> str:
    lines = item.text.splitlines()
    body_start = node.body[0].lineno - 1
    if ast.get_docstring(node):
        body_start = node.body[0].end_lineno
    prompt = "\n".join(lines[node.lineno - 1: body_start]) + "\n"
    return prompt[:MAX_PROMPT_CHARS]


def public_functions(files: list[corpus.SourceFile]) -> list[tuple[corpus.SourceFile, ast.FunctionDef]]:
    found = []
    for item in files:
        try:
            tree = ast.parse(item.text)
        except (SyntaxError, ValueError):
            continue
        found += [(item, n) for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
                  and n.body and ast.get_docstring(n)]
    return found


def build(seed: int = 0) -> dict[str, list]:
    heldout = [f for f in corpus.collect() if f.is_heldout and f.source == "stdlib"]
    rng = random.Random(seed)
    functions = public_functions(heldout)
    rng.shuffle(functions)
    code = [code_prompt(item, node) for item, node in functions[:NUM_PROMPTS]]
    asked = functions[NUM_PROMPTS: NUM_PROMPTS + NUM_PROMPTS + NUM_TURNS]
    questions = [rng.choice(PROSE_QUESTIONS).format(name=n.name, module=module_name(i), kind="function")
                 for i, n in asked]
    requests = [rng.choice(CODE_QUESTIONS).format(name=n.name, module=module_name(i), kind="function")
                for i, n in asked]
    chat = [render_chat([{"role": "user", "content": q}]) + "<|im_start|>assistant\n" for q in questions[:NUM_PROMPTS]]
    turns = [questions[NUM_PROMPTS + t] if t % 2 == 0 else requests[NUM_PROMPTS + t] for t in range(NUM_TURNS)]
    return {"code": code, "chat": chat, "multi_turn": turns, "batched": code[:2] + chat[:2]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    args.out.write_text(json.dumps(build(), indent=1) + "\n")


if __name__ == "__main__":
    main()
