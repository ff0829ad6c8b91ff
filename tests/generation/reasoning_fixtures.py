"""Tiny tokenizers of reasoning models, saved as Hugging Face folders: one with gpt-oss's harmony special tokens
and a harmony-form chat template, one with Qwen3's `<think>` tags and a ChatML template that knows them.

The templates are written for these tests in the form the real ones have (gpt-oss: the system and developer
messages, history as final-channel answers only, `<|start|>assistant` as the generation prompt; Qwen3: earlier
turns' reasoning dropped); they are not the published templates.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st
from tokenizers import AddedToken

from tests.text.tokenizer_fixtures import save_hf_folder, train_byte_level_tokenizer

HARMONY_TOKENS = ["<|startoftext|>", "<|endoftext|>", "<|start|>", "<|end|>", "<|message|>", "<|channel|>",
                  "<|constrain|>", "<|return|>", "<|call|>"]

HARMONY_TEMPLATE = """\
{{- '<|start|>system<|message|>You are a test model.\\nCurrent date: ' + strftime_now('%Y-%m-%d') }}
{{- '\\n\\nReasoning: ' + (reasoning_effort if reasoning_effort is defined else 'medium') }}
{{- '\\n\\n# Valid channels: analysis, commentary, final.<|end|>' }}
{%- if messages[0].role == 'system' %}
    {{- '<|start|>developer<|message|># Instructions\\n\\n' + messages[0].content + '<|end|>' }}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if message.role == 'assistant' %}
        {%- if '<|channel|>' in message.content %}
            {{- raise_exception('put the analysis in thinking and the answer in content, without <|channel|> tags') }}
        {%- endif %}
        {{- '<|start|>assistant<|channel|>final<|message|>' + message.content + '<|end|>' }}
    {%- else %}
        {{- '<|start|>' + message.role + '<|message|>' + message.content + '<|end|>' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start|>assistant{% endif %}"""

THINK_TEMPLATE = """\
{%- for message in messages %}
    {%- set content = message.content %}
    {%- if message.role == 'assistant' and '</think>' in content %}
        {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
    {%- endif %}
    {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and not enable_thinking %}{{- '<think>\\n\\n</think>\\n\\n' }}{% endif %}
    {%- if open_think is defined and open_think %}{{- '<think>\\n' }}{% endif %}
{%- endif %}"""


def save_harmony_folder(folder: Path, chat_template: str = HARMONY_TEMPLATE, vocab_size: int = 400) -> Path:
    """`vocab_size` of the trained part; the harmony tokens come after it."""
    backend = train_byte_level_tokenizer(vocab_size)
    backend.add_special_tokens([AddedToken(token, special=True) for token in HARMONY_TOKENS])
    return save_hf_folder(folder, backend, chat_template, bos_token="<|startoftext|>", eos_token="<|return|>",
                          pad_token="<|endoftext|>")


def save_think_folder(folder: Path, chat_template: str = THINK_TEMPLATE, vocab_size: int = 400) -> Path:
    """`<think>` and `</think>` are added tokens that are not special, as in Qwen3's tokenizer."""
    backend = train_byte_level_tokenizer(vocab_size)
    backend.add_tokens([AddedToken("<think>", special=False), AddedToken("</think>", special=False)])
    return save_hf_folder(folder, backend, chat_template, eos_token="<|im_end|>", pad_token="<|endoftext|>")


def write_reasoning_model(folder: Path, kind: str, model_type: str = "qwen3_moe") -> Path:
    """A tiny checkpoint with the `kind` ("harmony" or "think") tokenizer, sized to its vocabulary."""
    from engine.text.tokenizer import Tokenizer
    from tests.tiny_models import VOCAB, write_tiny_model

    write_tiny_model(folder, model_type)
    {"harmony": save_harmony_folder, "think": save_think_folder}[kind](folder, vocab_size=300)
    assert Tokenizer.from_folder(folder).vocab_size <= VOCAB
    return folder


# Pieces of harmony output, markers and their fragments included, for split-invariance properties.
HARMONY_PIECES = st.sampled_from([
    "<|channel|>", "<|message|>", "<|end|>", "<|start|>", "<|return|>", "<|call|>", "<|constrain|>", "analysis",
    "final", "commentary", " to=functions.f ", "assistant", "json", "<", "<|", "|>", " ", "\n", "text", "é🙂",
])


def parse(parser, pieces: list[str]):
    """Feed the pieces, then flush: -> (answer, reasoning, tool calls, whether the format's end was read)."""
    content, reasoning, tool_calls = [], [], []
    for parsed in [*(parser.feed(piece) for piece in pieces), parser.flush()]:
        content.append(parsed.content)
        reasoning.append(parsed.reasoning)
        tool_calls += parsed.tool_calls
    return "".join(content), "".join(reasoning), tool_calls, parser.is_ended
