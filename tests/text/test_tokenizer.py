"""engine.text.tokenizer against transformers (the reference) on tokenizers trained in-test."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("transformers")
import jinja2  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

from engine.text.detokenizer import StopStringMatcher  # noqa: E402
from engine.errors import RequestError, TokenizerError  # noqa: E402
from engine.text.tokenizer import Tokenizer  # noqa: E402
from tests.text.tokenizer_fixtures import (  # noqa: E402
    CHATML_TEMPLATE,
    LLAMA_TEMPLATE,
    TOOL_USE_TEMPLATE,
    TOOLS_TEMPLATE,
    UNSEEN_TEXT,
    edit_json,
    move_template_into_config,
    save_hf_folder,
    train_byte_level_tokenizer,
    train_metaspace_tokenizer,
    train_wordpiece_tokenizer,
    with_bos_post_processor,
)

REPLACEMENT_CHARACTER = "\ufffd"
SAMPLE_TEXTS = [
    "",
    "héllo wörld 你好 🙂",
    UNSEEN_TEXT,
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<s>[INST] a</s> b<|endoftext|>c  d",
    "  leading and trailing spaces  ",
    "a<pad>b<image>c",
    "x<|im_end|>   y<tool>z <tool> <|im_end|>",
]
CONVERSATIONS = {
    "user": [{"role": "user", "content": "Hi there! 你好 🙂"}],
    "system_user": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name a colour."},
    ],
    "multi_turn": [
        {"role": "system", "content": "Answer in French.\nBe brief."},
        {"role": "user", "content": "  What is 2+2?  "},
        {"role": "assistant", "content": "Quatre. 🙂"},
        {"role": "user", "content": "And 3+3?\n"},
    ],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Wetter für eine Stadt (°C) <b>now</b>",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
TOOL_CONVERSATION = [
    {"role": "system", "content": "Use tools."},
    {"role": "user", "content": "Weather in Zürich?"},
    {
        "role": "assistant",
        "content": None,
        "reasoning": "I should call the tool.",
        "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}],
    },
    {"role": "system", "content": "skipped by continue"},
    {"role": "tool", "content": "21 °C"},
    {"role": "user", "content": "STOP"},
    {"role": "user", "content": "never rendered"},
]


@pytest.fixture(scope="module")
def byte_level_backend():
    return train_byte_level_tokenizer()


@pytest.fixture(scope="module")
def metaspace_backend():
    return train_metaspace_tokenizer()


@pytest.fixture(scope="module")
def folders(tmp_path_factory, byte_level_backend, metaspace_backend) -> dict[str, Path]:
    """Every folder layout the tests read, built once."""
    root = tmp_path_factory.mktemp("tokenizers")
    chatml_tokens = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    llama_tokens = {"bos_token": "<s>", "eos_token": "</s>"}
    llama_backend = with_bos_post_processor(byte_level_backend)
    folders = {
        "chatml": save_hf_folder(root / "chatml", byte_level_backend, CHATML_TEMPLATE, **chatml_tokens),
        "chatml_in_config": save_hf_folder(
            root / "chatml_in_config", byte_level_backend, CHATML_TEMPLATE, **chatml_tokens
        ),
        "llama": save_hf_folder(root / "llama", llama_backend, LLAMA_TEMPLATE, **llama_tokens),
        "llama_in_config": save_hf_folder(root / "llama_in_config", llama_backend, LLAMA_TEMPLATE, **llama_tokens),
        "tools": save_hf_folder(root / "tools", byte_level_backend, TOOLS_TEMPLATE, **chatml_tokens),
        "named": save_hf_folder(root / "named", byte_level_backend, None, **chatml_tokens),
        "no_template": save_hf_folder(root / "no_template", byte_level_backend, None, **chatml_tokens),
        "metaspace": save_hf_folder(root / "metaspace", metaspace_backend, None, unk_token="<unk>", **llama_tokens),
        "legacy_special_map": save_hf_folder(root / "legacy_special_map", llama_backend, LLAMA_TEMPLATE),
        "new_special_tokens": save_hf_folder(root / "new_special_tokens", byte_level_backend, None, **chatml_tokens),
        "v4_added_tokens": save_hf_folder(root / "v4_added_tokens", byte_level_backend, None, **chatml_tokens),
    }
    move_template_into_config(folders["chatml_in_config"])
    move_template_into_config(folders["llama_in_config"])
    added_token = {"lstrip": False, "normalized": False, "rstrip": False, "single_word": False}
    edit_json(
        folders["llama_in_config"] / "tokenizer_config.json",
        bos_token={"__type": "AddedToken", "content": "<s>", **added_token},
        eos_token={"__type": "AddedToken", "content": "</s>", **added_token},
    )
    named_templates = [
        {"name": "default", "template": CHATML_TEMPLATE},
        {"name": "tool_use", "template": TOOL_USE_TEMPLATE},
    ]
    edit_json(folders["named"] / "tokenizer_config.json", chat_template=named_templates)
    edit_json(
        folders["legacy_special_map"] / "special_tokens_map.json",
        bos_token={"content": "<s>", **added_token},
        eos_token="</s>",
    )
    edit_json(folders["new_special_tokens"] / "tokenizer_config.json", pad_token="<pad>", image_token="<image>")
    # transformers 4 wrote added_tokens_decoder; entries that differ from tokenizer.json are re-added on load
    v4_added_tokens = {
        "2": {"content": "<|im_end|>", **added_token, "rstrip": True, "special": True},
        "1000": {"content": "<tool>", **added_token, "special": False},
    }
    edit_json(folders["v4_added_tokens"] / "tokenizer_config.json", added_tokens_decoder=v4_added_tokens)
    return folders


def load_both(folder: Path) -> tuple[Tokenizer, object]:
    return Tokenizer.from_folder(folder), AutoTokenizer.from_pretrained(folder)


ENCODING_FOLDERS = [
    "chatml",
    "llama",
    "llama_in_config",
    "metaspace",
    "legacy_special_map",
    "new_special_tokens",
    "v4_added_tokens",
]


@pytest.mark.parametrize("folder_name", ENCODING_FOLDERS)
@pytest.mark.parametrize("add_special_tokens", [True, False])
def test_encode_matches_transformers(folders, folder_name, add_special_tokens):
    ours, reference = load_both(folders[folder_name])
    for text in SAMPLE_TEXTS:
        expected = reference(text, add_special_tokens=add_special_tokens)["input_ids"]
        assert ours.encode(text, add_special_tokens=add_special_tokens) == expected, text


def test_bos_post_processor_adds_bos_once(folders):
    ours, _ = load_both(folders["llama"])
    assert ours.encode("hi")[0] == ours.bos_token_id
    assert ours.encode("hi", add_special_tokens=False)[0] != ours.bos_token_id


@pytest.mark.parametrize("folder_name", ENCODING_FOLDERS)
@pytest.mark.parametrize("skip_special_tokens", [True, False])
def test_decode_matches_transformers(folders, folder_name, skip_special_tokens):
    ours, reference = load_both(folders[folder_name])
    rng = random.Random(0)
    id_lists = [reference(text)["input_ids"] for text in SAMPLE_TEXTS]
    id_lists += [[rng.randrange(len(reference)) for _ in range(rng.randrange(1, 40))] for _ in range(50)]
    for ids in id_lists:
        assert ours.decode(ids, skip_special_tokens) == reference.decode(ids, skip_special_tokens=skip_special_tokens)


@pytest.mark.parametrize("folder_name", ENCODING_FOLDERS)
def test_vocabulary_and_special_ids_match_transformers(folders, folder_name):
    ours, reference = load_both(folders[folder_name])
    assert ours.vocab_size == len(reference)
    assert ours.special_token_ids == set(reference.all_special_ids) | {
        token_id for token_id, token in reference.added_tokens_decoder.items() if token.special
    }
    assert reference.eos_token_id in ours.eos_token_ids
    if reference.bos_token is not None:
        assert ours.bos_token_id == reference.bos_token_id
    assert ours.pad_token_id == reference.pad_token_id
    for token_id in range(len(reference)):
        assert ours.id_to_token(token_id) == reference.convert_ids_to_tokens(token_id)


def test_tokens_named_only_in_config_are_added_like_transformers(folders):
    ours, reference = load_both(folders["new_special_tokens"])
    pad_id, image_id = ours.token_to_id("<pad>"), ours.token_to_id("<image>")
    assert {pad_id, image_id} <= ours.special_token_ids
    assert ours.encode("a<pad>b<image>c") == reference("a<pad>b<image>c")["input_ids"]
    assert ours.pad_token_id == pad_id == reference.pad_token_id


@pytest.mark.parametrize("backend_name", ["wordpiece", "byte_level"])
def test_clean_up_tokenization_spaces_applies_to_non_bpe_models_only(tmp_path, byte_level_backend, backend_name):
    backend = train_wordpiece_tokenizer() if backend_name == "wordpiece" else byte_level_backend
    folder = save_hf_folder(tmp_path / backend_name, backend, None, clean_up_tokenization_spaces=True)
    ours, reference = load_both(folder)
    ids = ours.encode("the dog , the fox . isn't it ?")
    assert ours.decode(ids) == reference.decode(ids)
    assert (" ," in ours.decode(ids)) == (backend_name == "byte_level")


def test_eos_token_ids_are_the_union_of_tokenizer_and_model_configs(folders, tmp_path, byte_level_backend):
    folder = save_hf_folder(tmp_path / "model", byte_level_backend, None, eos_token="<|im_end|>")
    edit_json(folder / "config.json", eos_token_id=[0, 1], bos_token_id=3)
    edit_json(folder / "generation_config.json", eos_token_id=4)
    tokenizer = Tokenizer.from_folder(folder)
    assert tokenizer.eos_token_ids == {tokenizer.token_to_id("<|im_end|>"), 0, 1, 4}
    assert tokenizer.bos_token_id == 3


def test_model_config_ids_inside_text_config_count(tmp_path, byte_level_backend):
    folder = save_hf_folder(tmp_path / "model", byte_level_backend, None)
    edit_json(folder / "config.json", text_config={"eos_token_id": 2, "pad_token_id": 0})
    tokenizer = Tokenizer.from_folder(folder)
    assert tokenizer.eos_token_ids == {2}
    assert tokenizer.pad_token_id == 0


TEMPLATE_FOLDERS = ["chatml", "chatml_in_config", "llama", "llama_in_config", "legacy_special_map"]


@pytest.mark.parametrize("folder_name", TEMPLATE_FOLDERS)
@pytest.mark.parametrize("conversation", CONVERSATIONS.values(), ids=CONVERSATIONS.keys())
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_chat_template_matches_transformers(folders, folder_name, conversation, add_generation_prompt):
    ours, reference = load_both(folders[folder_name])
    expected = reference.apply_chat_template(conversation, tokenize=False, add_generation_prompt=add_generation_prompt)
    assert ours.apply_chat_template(conversation, add_generation_prompt=add_generation_prompt) == expected


def test_template_layouts_are_what_the_tests_claim(folders):
    assert (folders["chatml"] / "chat_template.jinja").is_file()
    assert "chat_template" not in json.loads((folders["chatml"] / "tokenizer_config.json").read_text())
    assert not (folders["chatml_in_config"] / "chat_template.jinja").exists()
    assert json.loads((folders["chatml_in_config"] / "tokenizer_config.json").read_text())["chat_template"]


def test_llama_template_starts_with_bos_and_encodes_it_once(folders):
    ours, reference = load_both(folders["llama"])
    conversation = CONVERSATIONS["multi_turn"]
    assert ours.apply_chat_template(conversation) == (
        "<s>[INST] <<SYS>>\nAnswer in French.\nBe brief.\n<</SYS>>\n\nWhat is 2+2? [/INST]"
        " Quatre. 🙂</s>[INST] And 3+3? [/INST]"
    )
    ids = ours.encode_chat(conversation)
    assert ids == reference.apply_chat_template(conversation, add_generation_prompt=True, return_dict=False)
    assert ids.count(ours.bos_token_id) == 1


@pytest.mark.parametrize("folder_name", ["chatml", "tools"])
def test_encode_chat_matches_transformers_tokenized(folders, folder_name):
    ours, reference = load_both(folders[folder_name])
    for conversation in CONVERSATIONS.values():
        expected = reference.apply_chat_template(conversation, add_generation_prompt=True, return_dict=False)
        assert ours.encode_chat(conversation) == expected


def test_template_rejecting_the_conversation_raises_request_error(folders):
    ours, reference = load_both(folders["llama"])
    conversation = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    with pytest.raises(jinja2.TemplateError):
        reference.apply_chat_template(conversation, tokenize=False)
    with pytest.raises(RequestError, match="roles must alternate"):
        ours.apply_chat_template(conversation)


def test_empty_conversation_is_a_request_error(folders):
    with pytest.raises(RequestError, match="empty"):
        Tokenizer.from_folder(folders["chatml"]).apply_chat_template([])


@pytest.mark.parametrize("add_generation_prompt", [True, False])
@pytest.mark.parametrize("with_tools", [True, False])
def test_tools_template_with_tojson_and_loop_controls_matches_transformers(folders, add_generation_prompt, with_tools):
    ours, reference = load_both(folders["tools"])
    tools = TOOLS if with_tools else None
    options = {"add_generation_prompt": add_generation_prompt, "tools": tools, "enable_thinking": False}
    expected = reference.apply_chat_template(TOOL_CONVERSATION, tokenize=False, **options)
    rendered = ours.apply_chat_template(TOOL_CONVERSATION, **options)
    assert rendered == expected
    assert "never rendered" not in rendered and "skipped by continue" not in rendered
    assert "<think>I should call the tool.</think>" in rendered
    if with_tools:
        assert "für eine Stadt (°C) <b>now</b>" in rendered


def test_named_templates_use_default_and_tool_use_like_transformers(folders):
    ours, reference = load_both(folders["named"])
    conversation = CONVERSATIONS["user"]
    plain = ours.apply_chat_template(conversation)
    assert plain == reference.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    assert plain.startswith("<|im_start|>user")
    with_tools = ours.apply_chat_template(conversation, tools=TOOLS)
    expected = reference.apply_chat_template(conversation, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    assert with_tools == expected
    assert with_tools.startswith("TOOLS 1")


def test_template_file_wins_over_tokenizer_config(folders, tmp_path, byte_level_backend):
    folder = save_hf_folder(tmp_path / "both", byte_level_backend, CHATML_TEMPLATE, eos_token="<|im_end|>")
    edit_json(folder / "tokenizer_config.json", chat_template=TOOL_USE_TEMPLATE)
    ours, reference = load_both(folder)
    conversation = CONVERSATIONS["user"]
    rendered = ours.apply_chat_template(conversation)
    assert rendered == reference.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    assert rendered.startswith("<|im_start|>user")


def test_no_chat_template_raises_tokenizer_error(folders):
    tokenizer = Tokenizer.from_folder(folders["no_template"])
    assert not tokenizer.has_chat_template
    with pytest.raises(TokenizerError, match="no chat template"):
        tokenizer.apply_chat_template(CONVERSATIONS["user"])


def test_broken_template_raises_tokenizer_error_naming_the_file(tmp_path, byte_level_backend):
    folder = save_hf_folder(tmp_path / "broken", byte_level_backend, "{% for message in %}")
    tokenizer = Tokenizer.from_folder(folder)
    assert tokenizer.encode("hi") == Tokenizer.from_folder(folder).encode("hi")
    with pytest.raises(TokenizerError, match="chat_template.jinja"):
        tokenizer.apply_chat_template(CONVERSATIONS["user"])


def test_missing_tokenizer_json_names_the_file(tmp_path, byte_level_backend):
    folder = save_hf_folder(tmp_path / "model", byte_level_backend, None)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(TokenizerError, match="tokenizer.json is missing"):
        Tokenizer.from_folder(folder)


@pytest.mark.parametrize("content", ['{"version": "1.0", "model": ', "{}", "[]", "\xff\xfe"])
def test_corrupt_tokenizer_json_names_the_file(tmp_path, byte_level_backend, content):
    folder = save_hf_folder(tmp_path / "model", byte_level_backend, None)
    (folder / "tokenizer.json").write_text(content, encoding="latin-1")
    with pytest.raises(TokenizerError, match="tokenizer.json"):
        Tokenizer.from_folder(folder)


@pytest.mark.parametrize(
    ("file_name", "content", "message"),
    [
        ("tokenizer_config.json", "{not json", "tokenizer_config.json"),
        ("tokenizer_config.json", '{"eos_token": 7}', "eos_token"),
        ("tokenizer_config.json", '{"chat_template": 3}', "chat_template"),
        ("config.json", '{"eos_token_id": "</s>"}', "eos_token_id"),
        ("generation_config.json", "[1, 2]", "generation_config.json"),
    ],
)
def test_malformed_config_files_raise_tokenizer_error(tmp_path, byte_level_backend, file_name, content, message):
    folder = save_hf_folder(tmp_path / "model", byte_level_backend, None)
    (folder / file_name).write_text(content, encoding="utf-8")
    with pytest.raises(TokenizerError, match=message):
        Tokenizer.from_folder(folder)


def test_missing_folder_raises_tokenizer_error(tmp_path):
    with pytest.raises(TokenizerError, match="not a folder"):
        Tokenizer.from_folder(tmp_path / "absent")


# --- incremental detokenizer ---------------------------------------------------------------------

STREAM_TEXT = "Grüße 😀<|im_end|> Ω∑ 한국어<|endoftext|>🙂🚀 naïve — “quoted” end"


def stream(tokenizer: Tokenizer, ids: list[int], **options) -> tuple[list[str], str]:
    detokenizer = tokenizer.detokenizer(**options)
    deltas = [detokenizer.push(token_id) for token_id in ids]
    return deltas, detokenizer.flush()


@pytest.mark.parametrize("folder_name", ["chatml", "metaspace"])
@pytest.mark.parametrize("skip_special_tokens", [True, False])
def test_deltas_concatenate_to_decode_for_every_prefix(folders, folder_name, skip_special_tokens):
    tokenizer = Tokenizer.from_folder(folders[folder_name])
    ids = tokenizer.encode(STREAM_TEXT)
    for length in range(len(ids) + 1):
        deltas, rest = stream(tokenizer, ids[:length], skip_special_tokens=skip_special_tokens)
        assert "".join(deltas) + rest == tokenizer.decode(ids[:length], skip_special_tokens), length


def test_deltas_never_split_a_character(folders):
    tokenizer = Tokenizer.from_folder(folders["chatml"])
    ids = tokenizer.encode(STREAM_TEXT)
    partial_prefixes = [n for n in range(len(ids)) if tokenizer.decode(ids[:n]).endswith(REPLACEMENT_CHARACTER)]
    assert partial_prefixes, "the test text must put some characters across several tokens"
    deltas, rest = stream(tokenizer, ids)
    assert not any(REPLACEMENT_CHARACTER in delta for delta in deltas)
    assert rest == ""


def test_flush_returns_an_unfinished_character(folders):
    tokenizer = Tokenizer.from_folder(folders["chatml"])
    emoji_ids = tokenizer.encode("😀", add_special_tokens=False)
    assert len(emoji_ids) > 1
    deltas, rest = stream(tokenizer, emoji_ids[:-1])
    assert "".join(deltas) == "" and rest == tokenizer.decode(emoji_ids[:-1]) != ""


@pytest.mark.parametrize("folder_name", ["chatml", "metaspace"])
def test_random_token_ids_concatenate_to_decode(folders, folder_name):
    tokenizer = Tokenizer.from_folder(folders[folder_name])
    rng = random.Random(1)
    for _ in range(40):
        ids = [rng.randrange(tokenizer.vocab_size) for _ in range(rng.randrange(1, 60))]
        deltas, rest = stream(tokenizer, ids)
        assert "".join(deltas) + rest == tokenizer.decode(ids)


@pytest.mark.parametrize("folder_name", ["chatml", "metaspace"])
def test_deltas_after_a_prompt_continue_its_text(folders, folder_name):
    tokenizer = Tokenizer.from_folder(folders[folder_name])
    prompt_ids = tokenizer.encode("<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n")
    generated_ids = tokenizer.encode("the lazy dog 😀 done<|im_end|>", add_special_tokens=False)
    deltas, rest = stream(tokenizer, generated_ids, prompt_ids=prompt_ids)
    prompt_text = tokenizer.decode(prompt_ids)
    full_text = tokenizer.decode(prompt_ids + generated_ids)
    assert full_text.startswith(prompt_text)
    assert "".join(deltas) + rest == full_text[len(prompt_text) :]
    if folder_name == "metaspace":
        assert "".join(deltas).startswith(" the lazy dog")


def test_each_push_decodes_a_short_window(folders):
    tokenizer = Tokenizer.from_folder(folders["chatml"])
    ids = tokenizer.encode(STREAM_TEXT * 20)
    window_lengths = []
    decode = tokenizer.decode
    tokenizer.decode = lambda window, skip_special_tokens=True: window_lengths.append(len(window)) or decode(
        window, skip_special_tokens
    )
    deltas, rest = stream(tokenizer, ids)
    assert max(window_lengths) < 20
    assert "".join(deltas) + rest == decode(ids)


# --- stop strings ----------------------------------------------------------------------------------


def feed_all(matcher: StopStringMatcher, deltas: list[str]) -> tuple[str, bool]:
    emitted, stopped = [], False
    for delta in deltas:
        text, stopped = matcher.feed(delta)
        emitted.append(text)
        if stopped:
            break
    if not stopped:
        emitted.append(matcher.flush())
    return "".join(emitted), stopped


def test_stop_string_spanning_deltas_is_cut_and_not_emitted():
    matcher = StopStringMatcher(["<|user|>"])
    assert matcher.feed("Hello <|us") == ("Hello ", False)
    assert matcher.feed("er|> more") == ("", True)
    assert matcher.matched_stop == "<|user|>"
    assert matcher.feed("later") == ("", True)


def test_held_text_that_is_not_a_stop_is_released():
    matcher = StopStringMatcher(["###"])
    assert matcher.feed("a#") == ("a", False)
    assert matcher.feed("#b") == ("##b", False)
    assert matcher.feed("end##") == ("end", False)
    assert matcher.flush() == "##"


def test_earliest_stop_string_wins():
    matcher = StopStringMatcher(["STOP1", "STOP2"])
    assert feed_all(matcher, ["abc STOP2 def ", "STOP1"]) == ("abc ", True)
    assert matcher.matched_stop == "STOP2"


def test_no_stop_strings_pass_text_through():
    matcher = StopStringMatcher([])
    assert matcher.feed("anything <|im_end|>") == ("anything <|im_end|>", False)
    assert matcher.flush() == ""


@pytest.mark.parametrize("seed", range(20))
def test_stop_strings_match_a_plain_search_for_any_split(seed):
    rng = random.Random(seed)
    stops = ["\n\nUser:", "</s>", "aab", "😀x"]
    text = "".join(rng.choice(["a", "b", "\n", "User:", "</", "s>", "😀", "x", " "]) for _ in range(60))
    cuts = sorted(rng.sample(range(1, len(text)), k=min(10, len(text) - 1)))
    deltas = [text[start:end] for start, end in zip([0, *cuts], [*cuts, len(text)])]
    found = [text.find(stop) for stop in stops if stop in text]
    expected = (text[: min(found)], True) if found else (text, False)
    assert feed_all(StopStringMatcher(stops), deltas) == expected
