"""Every kind of bad input gets a 4xx with OpenAI's error JSON naming the problem, and the server
goes on answering good requests."""

import json

import httpx
import pytest
from live_server import tiny_server

MAX_MODEL_LEN, VOCAB = 128, 512
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def server():
    with tiny_server(
        engine_overrides={"max_model_len": MAX_MODEL_LEN}, max_request_body_bytes=64 << 10
    ) as live:
        yield live


def body(**fields) -> bytes:
    return json.dumps({"model": "tiny", "prompt": [5, 6, 7], "max_tokens": 4} | fields).encode()


def without(field: str) -> bytes:
    data = json.loads(body())
    del data[field]
    return json.dumps(data).encode()


# (case, path, raw body, expected status, words the message must contain, param)
CASES = [
    ("malformed JSON", "/v1/completions", b'{"prompt": [1, 2', 400, ["not valid JSON"], None),
    ("not an object", "/v1/completions", b"[1, 2, 3]", 400, ["valid dictionary"], None),
    ("missing prompt", "/v1/completions", without("prompt"), 400, ["prompt", "missing"], "prompt"),
    (
        "missing messages",
        "/v1/chat/completions",
        b'{"model": "tiny"}',
        400,
        ["messages", "missing"],
        "messages",
    ),
    ("empty messages", "/v1/chat/completions", b'{"messages": []}', 400, ["messages"], "messages"),
    ("prompt of wrong type", "/v1/completions", body(prompt={"a": 1}), 400, ["prompt"], "prompt"),
    (
        "max_tokens of wrong type",
        "/v1/completions",
        body(max_tokens="many"),
        400,
        ["max_tokens", "many"],
        "max_tokens",
    ),
    (
        "prompt over max_model_len",
        "/v1/completions",
        body(prompt=[5] * (MAX_MODEL_LEN + 3), max_tokens=1),
        400,
        [str(MAX_MODEL_LEN + 3), str(MAX_MODEL_LEN)],
        "prompt",
    ),
    (
        "prompt + max_tokens over max_model_len",
        "/v1/completions",
        body(prompt=[5] * 100, max_tokens=50),
        400,
        ["100", "50", str(MAX_MODEL_LEN)],
        "prompt",
    ),
    (
        "token id past the vocabulary",
        "/v1/completions",
        body(prompt=[5, VOCAB]),
        400,
        [str(VOCAB), "vocabulary"],
        "prompt",
    ),
    (
        "negative token id",
        "/v1/completions",
        body(prompt=[5, -1]),
        400,
        ["-1", "vocabulary"],
        "prompt",
    ),
    ("empty prompt", "/v1/completions", body(prompt=[]), 400, ["empty"], "prompt"),
    (
        "zero max_tokens",
        "/v1/completions",
        body(max_tokens=0),
        400,
        ["max_tokens", "greater than or equal to 1"],
        "max_tokens",
    ),
    (
        "negative max_tokens",
        "/v1/completions",
        body(max_tokens=-5),
        400,
        ["max_tokens", "-5"],
        "max_tokens",
    ),
    (
        "negative temperature",
        "/v1/completions",
        body(temperature=-0.5),
        400,
        ["temperature", "-0.5"],
        "temperature",
    ),
    ("top_p of zero", "/v1/completions", body(top_p=0), 400, ["top_p"], "top_p"),
    ("top_p over one", "/v1/completions", body(top_p=1.5), 400, ["top_p", "1.5"], "top_p"),
    (
        "min_tokens over max_tokens",
        "/v1/completions",
        body(min_tokens=9),
        400,
        ["min_tokens", "9"],
        None,
    ),
    ("n above one", "/v1/completions", body(n=3), 400, ["n is 3", "n=1"], "n"),
    ("logprobs asked for", "/v1/completions", body(logprobs=5), 400, ["logprobs"], "logprobs"),
    ("unknown model", "/v1/completions", body(model="gpt-17"), 404, ["gpt-17", "tiny"], "model"),
    (
        "unknown model in chat",
        "/v1/chat/completions",
        json.dumps({"model": "nope", "messages": [{"role": "user", "content": "x"}]}).encode(),
        404,
        ["nope"],
        "model",
    ),
    (
        "oversized body",
        "/v1/completions",
        body(prompt=[5] * 40_000),
        413,
        ["over the limit", str(64 << 10)],
        None,
    ),
    ("non-UTF-8 bytes", "/v1/completions", b'{"prompt": "caf\xe9"}', 400, ["UTF-8", "0xe9"], None),
    (
        "NaN temperature",
        "/v1/completions",
        b'{"prompt": [5], "temperature": NaN}',
        400,
        ["temperature", "finite"],
        "temperature",
    ),
    ("seed past 64 bits", "/v1/completions", body(seed=2**70), 400, ["seed"], "seed"),
]


@pytest.mark.parametrize("case, path, raw, status, words, param", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_openai_error(server, case, path, raw, status, words, param):
    response = httpx.post(server.url + path, content=raw, headers=JSON, timeout=30)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == status
    for word in words:
        assert word in error["message"], f"{case}: {word!r} not in {error['message']!r}"
    if param is not None:
        assert error["param"] == param


def test_bad_timeout_header_is_refused(server):
    response = httpx.post(
        server.url + "/v1/completions",
        content=body(),
        timeout=30,
        headers=JSON | {"X-Request-Timeout": "soon"},
    )
    assert (
        response.status_code == 400 and "X-Request-Timeout" in response.json()["error"]["message"]
    )


def test_unknown_route_is_an_openai_404(server):
    response = httpx.get(server.url + "/v1/nothing", timeout=10)
    assert response.status_code == 404 and response.json()["error"]["code"] == 404


def test_good_requests_still_served_after_bad_ones(server):
    for _, path, raw, *_ in CASES[:6]:
        httpx.post(server.url + path, content=raw, headers=JSON, timeout=30)
    response = httpx.post(
        server.url + "/v1/completions",
        content=body(max_tokens=5, ignore_eos=True),
        headers=JSON,
        timeout=30,
    )
    assert response.status_code == 200, response.text
    assert response.json()["usage"]["completion_tokens"] == 5
    server.wait_idle()
    assert server.serving.engine.num_step_errors == 0
