"""The official openai client against a real server on loopback: chat and completions, streamed and not,
and the same greedy output as `wisp run`."""

import json

from engine.cli import main

PROMPT = "def fib(n):"
QUESTION = "What is the json module for?"


def wisp_run_json(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["run", "--device", "cpu", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_models_lists_the_served_model(client):
    (model,) = client.models.list().data
    assert model.id == "wisp-demo" and model.owned_by == "wisp"
    assert client.models.retrieve("wisp-demo").id == "wisp-demo"


def test_chat_greedy_equals_wisp_run(client, capsys):
    expected = wisp_run_json(capsys, "--chat", "--prompt", QUESTION, "--max-tokens", "24")
    response = client.chat.completions.create(model="wisp-demo", messages=[{"role": "user", "content": QUESTION}],
                                              max_tokens=24, temperature=0)
    choice = response.choices[0]
    assert choice.message.content == expected["text"]
    assert choice.finish_reason == expected["finish_reason"]
    assert response.usage.completion_tokens == expected["stats"]["generated_tokens"]
    assert response.usage.prompt_tokens == expected["stats"]["prompt_tokens"]


def test_completion_greedy_equals_wisp_run_token_for_token(client, capsys):
    expected = wisp_run_json(capsys, "--prompt", PROMPT, "--max-tokens", "24")
    response = client.completions.create(model="wisp-demo", prompt=PROMPT, max_tokens=24, temperature=0,
                                         logprobs=0, extra_body={"return_tokens_as_token_ids": True})
    logprobs = response.choices[0].logprobs
    assert response.choices[0].text == expected["text"]
    assert [int(token.split(":")[1]) for token in logprobs.tokens] == expected["token_ids"]
    assert logprobs.token_logprobs == expected["logprobs"]


def test_streamed_chat_adds_up_to_the_whole_answer(client):
    messages = [{"role": "user", "content": QUESTION}]
    whole = client.chat.completions.create(model="wisp-demo", messages=messages, max_tokens=30, temperature=0)
    chunks = list(client.chat.completions.create(model="wisp-demo", messages=messages, max_tokens=30, temperature=0,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
    assert text == whole.choices[0].message.content
    reasons = [chunk.choices[0].finish_reason for chunk in chunks if chunk.choices]
    assert reasons[-1] == whole.choices[0].finish_reason and not any(reasons[:-1])
    assert chunks[-1].usage == whole.usage and not chunks[-1].choices


def test_streamed_completion_with_stop_string(client):
    whole = client.completions.create(model="wisp-demo", prompt=PROMPT, max_tokens=30, temperature=0)
    stop = whole.choices[0].text.strip()[4:9]  # a piece of the greedy answer
    chunks = list(client.completions.create(model="wisp-demo", prompt=PROMPT, max_tokens=30, temperature=0,
                                            stop=[stop], stream=True))
    text = "".join(chunk.choices[0].text for chunk in chunks)
    assert text == whole.choices[0].text[:whole.choices[0].text.index(stop)]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_seed_makes_sampling_repeatable(client):
    def sample(seed):
        return client.completions.create(model="wisp-demo", prompt=PROMPT, max_tokens=16, temperature=1.0,
                                         top_p=0.9, seed=seed).choices[0].text

    assert sample(7) == sample(7)
    assert len({sample(seed) for seed in range(4)}) > 1


def test_token_id_prompt_answers_like_its_text(client):
    from engine.loading.model_path import DEMO_MODEL
    from engine.text.tokenizer import Tokenizer

    ids = Tokenizer.from_folder(DEMO_MODEL).encode(PROMPT)
    by_text = client.completions.create(model="wisp-demo", prompt=PROMPT, max_tokens=12, temperature=0)
    by_ids = client.completions.create(model="wisp-demo", prompt=ids, max_tokens=12, temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text and by_ids.usage.prompt_tokens == len(ids)


def test_text_content_parts_are_joined(client):
    parts = client.chat.completions.create(
        model="wisp-demo", max_tokens=8, temperature=0,
        messages=[{"role": "user", "content": [{"type": "text", "text": "What is the json "},
                                                {"type": "text", "text": "module for?"}]}])
    plain = client.chat.completions.create(model="wisp-demo", max_tokens=8, temperature=0,
                                           messages=[{"role": "user", "content": QUESTION}])
    assert parts.choices[0].message.content == plain.choices[0].message.content
