"""Chat-formatted training samples made from the corpus' own docstrings and source.

For a module docstring, a public function or a public class with a docstring, one of:
- user asks what it does / what it is for -> assistant answers with the docstring's first
  paragraphs (prose);
- user asks for the code -> assistant answers with its source in a ```python block.
Choices (question wording, system prompt or none, prose or code) come from a random.Random
seeded by the file key, so the samples are the same on every machine.
"""

from __future__ import annotations

import ast
import random

from training.corpus import SourceFile

SYSTEM_PROMPTS = (
    "You are Wisp, a small demo model trained on Python source code.",
    "You are a helpful assistant for Python programmers.",
)
PROSE_QUESTIONS = (
    "What does `{name}` in `{module}` do?",
    "Explain `{module}.{name}`.",
    "What is `{module}.{name}` for?",
    "Can you describe the {kind} `{name}` from `{module}`?",
)
MODULE_QUESTIONS = (
    "What is the `{module}` module for?",
    "Tell me about the Python module `{module}`.",
    "What does `{module}` provide?",
)
CODE_QUESTIONS = (
    "Write the {kind} `{name}` from `{module}`.",
    "Show me how `{module}.{name}` is implemented.",
    "Implement `{name}` like `{module}` does.",
)
MAX_ANSWER_CHARS = 1200
MAX_SAMPLES_PER_FILE = 6


def render_chat(messages: list[dict]) -> str:
    """ChatML, the same text as the shipped chat template renders (without generation prompt)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def module_name(item: SourceFile) -> str:
    parts = item.relpath[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or item.source


def first_paragraphs(docstring: str) -> str:
    paragraphs = [p.strip() for p in docstring.strip().split("\n\n") if p.strip()]
    answer = ""
    for paragraph in paragraphs:
        if answer and len(answer) + len(paragraph) > MAX_ANSWER_CHARS // 2:
            break
        answer = f"{answer}\n\n{paragraph}" if answer else paragraph
    return answer[:MAX_ANSWER_CHARS]


def conversation(rng: random.Random, question: str, answer: str) -> str:
    messages = [{"role": "system", "content": rng.choice(SYSTEM_PROMPTS)}] if rng.random() < 0.5 else []
    messages += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return render_chat(messages)


def definition_sample(rng: random.Random, node: ast.AST, text: str, module: str) -> str | None:
    docstring = ast.get_docstring(node)
    kind = "class" if isinstance(node, ast.ClassDef) else "function"
    fields = {"name": node.name, "module": module, "kind": kind}
    source = ast.get_source_segment(text, node) or ""
    if source and len(source) <= MAX_ANSWER_CHARS and rng.random() < 0.45:
        return conversation(rng, rng.choice(CODE_QUESTIONS).format(**fields), f"```python\n{source}\n```")
    if docstring and len(docstring) > 20:
        return conversation(rng, rng.choice(PROSE_QUESTIONS).format(**fields), first_paragraphs(docstring))
    return None


def samples_for_file(item: SourceFile) -> list[str]:
    try:
        tree = ast.parse(item.text)
    except (SyntaxError, ValueError):
        return []
    rng = random.Random(item.key)
    module = module_name(item)
    samples = []
    docstring = ast.get_docstring(tree)
    if docstring and len(docstring) > 40:
        samples.append(conversation(rng, rng.choice(MODULE_QUESTIONS).format(module=module),
                                    first_paragraphs(docstring)))
    definitions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                   and not n.name.startswith("_")]
    rng.shuffle(definitions)
    for node in definitions:
        if len(samples) >= MAX_SAMPLES_PER_FILE:
            break
        sample = definition_sample(rng, node, item.text, module)
        if sample:
            samples.append(sample)
    return samples
