"""Tiny tokenizers trained in-test and saved as Hugging Face folders, with the chat templates the tests use."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>"]
TRAINING_TEXT = [
    "héllo wörld 你好 🙂 the quick brown fox jumps over the lazy dog.",
    "Ünïcödé ñ ç ß, 日本語のテキスト and emoji 🚀🙂 in one line!",
    "def square(x):\n    return x * x  # code with    spaces\n",
    "User: what's the weather? Assistant: it's sunny, isn't it?",
] * 20
# Characters absent from TRAINING_TEXT stay split into byte tokens, so their UTF-8 spans several tokens.
UNSEEN_TEXT = "Grüße 😀 Ω∑ 한국어 🙂 naïve café — “quotes” \t tabs\n\nnew lines"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# Indented across lines: without lstrip_blocks / trim_blocks the indentation and newlines would leak out.
LLAMA_TEMPLATE = """\
{%- if messages[0]['role'] == 'system' %}
    {%- set system = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system is defined %}
            {{- '[INST] <<SYS>>\\n' + system + '\\n<</SYS>>\\n\\n' + message['content'] | trim + ' [/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] | trim + ' [/INST]' }}
        {%- endif %}
    {%- else %}
        {% generation %}{{ ' ' + message['content'] | trim + eos_token }}{% endgeneration %}
    {%- endif %}
{%- endfor %}
"""

TOOLS_TEMPLATE = """\
{%- set settings = dict(style='tools', version=2) %}
{%- if tools %}
<|im_start|>system
Today is {{ strftime_now('%Y-%m-%d') }}. Settings: {{ settings | tojson }}
{% for tool in tools %}
{{ tool | tojson }}
{{ tool | tojson(indent=2) }}
{% endfor %}
<|im_end|>
{% endif %}
{%- set ns = namespace(turns=0) %}
{%- for message in messages %}
    {%- if message.role == 'system' and not loop.first %}{% continue %}{% endif %}
    {%- if message.content == 'STOP' %}{% break %}{% endif %}
    {%- set ns.turns = ns.turns + 1 %}
<|im_start|>{{ message.role }}
{% if message.reasoning_content %}<think>{{ message.reasoning_content }}</think>
{% endif %}
{%- if message.tool_calls is defined %}
{%- for call in message.tool_calls %}
<tool_call>{{ call | tojson(separators=(',', ':'), sort_keys=true) }}</tool_call>
{% endfor %}
{%- else %}{{ message.content }}{% endif %}<|im_end|>
{% endfor %}
{{- 'turns=' ~ ns.turns ~ ' documents=' ~ (documents is defined) }}
{%- if add_generation_prompt %}
<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif %}
{%- endif %}
"""

TOOL_USE_TEMPLATE = "{{ 'TOOLS ' ~ (tools | length) }}{% for m in messages %}|{{ m.role }}:{{ m.content }}{% endfor %}"


def train_byte_level_tokenizer(vocab_size: int = 400) -> Tokenizer:
    """A GPT-2/Qwen-style byte-level BPE with ChatML and Llama special tokens."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer)
    return tokenizer


def train_metaspace_tokenizer(vocab_size: int = 300) -> Tokenizer:
    """A SentencePiece-style BPE whose decoder strips the leading space of the first token."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", *SPECIAL_TOKENS])
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer)
    return tokenizer


def train_wordpiece_tokenizer(vocab_size: int = 300) -> Tokenizer:
    """A BERT-style WordPiece whose decoder leaves " ," and " ." for transformers' clean-up to join."""
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.decoder = decoders.WordPiece(cleanup=False)
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=["[UNK]", "[SEP]"])
    tokenizer.train_from_iterator(TRAINING_TEXT, trainer)
    return tokenizer


def with_bos_post_processor(tokenizer: Tokenizer, bos: str = "<s>") -> Tokenizer:
    """A copy whose post-processor prepends `bos`, as Llama and Mixtral tokenizer.json files do."""
    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, copy.token_to_id(bos))]
    )
    return copy


def save_hf_folder(folder: Path, backend: Tokenizer, chat_template: str | None = None, **special_tokens: Any) -> Path:
    """Save through transformers, as a real checkpoint would be (recent versions write chat_template.jinja)."""
    from transformers import PreTrainedTokenizerFast

    hf_tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, chat_template=chat_template, **special_tokens)
    hf_tokenizer.save_pretrained(folder)
    return folder


def edit_json(path: Path, **changes: Any) -> None:
    """Set (or, with value None, remove) top-level keys of a JSON file, creating it when absent."""
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data, ensure_ascii=False, indent=2), encoding="utf-8")


def move_template_into_config(folder: Path) -> None:
    """Rewrite a folder in the older layout: the template inside tokenizer_config.json, no .jinja file."""
    jinja_path = folder / "chat_template.jinja"
    edit_json(folder / "tokenizer_config.json", chat_template=jinja_path.read_text(encoding="utf-8"))
    jinja_path.unlink()
