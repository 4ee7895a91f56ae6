"""The official `openai` client against the live server: completions, chat, streaming, usage, models,
stop strings, and the Prometheus metrics under vLLM's names."""

import numpy as np
import openai
import pytest
from live_server import tiny_server

MODEL = "tiny-chat"


@pytest.fixture(scope="module")
def server():
    with tiny_server(served_model_names=[MODEL]) as live:
        yield live


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(
        base_url=f"{server.url}/v1", api_key="unused", max_retries=0, timeout=60
    ) as c:
        yield c


def random_prompt(seed: int, length: int) -> list[int]:
    return np.random.default_rng(seed).integers(3, 512, length).tolist()


def test_models_lists_the_served_name(client):
    assert [m.id for m in client.models.list().data] == [MODEL]


def test_completion_returns_max_tokens_and_usage(client):
    prompt = random_prompt(1, 17)
    result = client.completions.create(
        model=MODEL, prompt=prompt, max_tokens=9, temperature=0, extra_body={"ignore_eos": True}
    )
    assert result.object == "text_completion"
    assert result.choices[0].finish_reason == "length"
    assert result.usage.prompt_tokens == 17
    assert result.usage.completion_tokens == 9
    assert result.usage.total_tokens == 26


def test_text_prompt_is_tokenized_byte_by_byte(client):
    result = client.completions.create(
        model=MODEL, prompt="héllo", max_tokens=2, extra_body={"ignore_eos": True}
    )
    assert result.usage.prompt_tokens == 1 + len("héllo".encode())  # BOS + one id per UTF-8 byte


def test_greedy_is_deterministic_and_streaming_matches(client):
    prompt = random_prompt(2, 11)
    kwargs = dict(
        model=MODEL, prompt=prompt, max_tokens=12, temperature=0, extra_body={"ignore_eos": True}
    )
    whole = client.completions.create(**kwargs)
    chunks = list(
        client.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs)
    )
    text_chunks = [c for c in chunks if c.choices]
    assert "".join(c.choices[0].text for c in text_chunks) == whole.choices[0].text
    assert text_chunks[-1].choices[0].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == 12 and chunks[-1].usage.prompt_tokens == 11
    assert len(text_chunks) <= 12


def test_seeded_sampling_repeats(client):
    kwargs = dict(
        model=MODEL,
        prompt=random_prompt(3, 8),
        max_tokens=10,
        temperature=1.0,
        seed=1234,
        extra_body={"ignore_eos": True},
    )
    assert (
        client.completions.create(**kwargs).choices[0].text
        == client.completions.create(**kwargs).choices[0].text
    )


def test_chat_completion_and_stream(client):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
    whole = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=6, temperature=0, extra_body={"ignore_eos": True}
    )
    assert whole.object == "chat.completion"
    assert whole.choices[0].message.role == "assistant"
    assert whole.usage.completion_tokens == 6
    stream = list(
        client.chat.completions.create(
            model=MODEL,
            messages=messages,
            max_tokens=6,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
    )
    assert stream[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert content == whole.choices[0].message.content
    assert stream[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_stop_string_cuts_the_text(server, client):
    stops_before = server.metric("vllm:request_success_total", finished_reason="stop")
    kwargs = dict(
        model=MODEL,
        prompt=random_prompt(4, 9),
        max_tokens=40,
        temperature=0,
        extra_body={"ignore_eos": True},
    )
    full = client.completions.create(**kwargs).choices[0].text
    stop = next((ch for ch in full[1:] if ch.isascii() and ch.isprintable()), None)
    assert stop is not None, f"no printable ASCII character to stop on in {full!r}"
    cut = client.completions.create(stop=[stop], **kwargs)
    assert cut.choices[0].text == full[: full.index(stop)]
    assert cut.choices[0].finish_reason == "stop"
    streamed = list(client.completions.create(stop=[stop], stream=True, **kwargs))
    assert "".join(c.choices[0].text for c in streamed if c.choices) == full[: full.index(stop)]
    server.wait_idle()
    assert server.metric("vllm:request_success_total", finished_reason="stop") == stops_before + 2


def test_metrics_use_vllm_names_and_count(server, client):
    before = server.metric("vllm:generation_tokens_total")
    successes = server.metric("vllm:request_success_total", finished_reason="length")
    client.completions.create(
        model=MODEL, prompt=random_prompt(5, 5), max_tokens=7, extra_body={"ignore_eos": True}
    )
    server.wait_idle()
    assert server.metric("vllm:generation_tokens_total") == before + 7
    assert server.metric("vllm:request_success_total", finished_reason="length") == successes + 1
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total",
        "vllm:prompt_tokens_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:request_queue_time_seconds_count",
        "surgeplan:kv_block_allocations_per_second",
        "surgeplan:prefix_cache_hit_rate",
        "surgeplan:kv_fragmented_slots",
    ):
        server.metric(name)  # raises KeyError when missing
    assert server.metric("vllm:inter_token_latency_seconds_count") >= 6
    assert server.metric("surgeplan:tenant_kv_blocks", tenant="default") == 0


def test_prefix_cache_hits_show_in_metrics(server, client):
    prompt = random_prompt(6, 40)  # five full blocks of 8 tokens
    hits_before = server.metric("vllm:prefix_cache_hits_total")
    for _ in range(2):
        client.completions.create(
            model=MODEL, prompt=prompt, max_tokens=2, extra_body={"ignore_eos": True}
        )
    server.wait_idle()
    assert server.metric("vllm:prefix_cache_hits_total") - hits_before >= 32
    assert 0 < server.metric("surgeplan:prefix_cache_hit_rate") <= 1


def test_health(server):
    import httpx

    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
