"""Schemathesis over the server's own OpenAPI schema, against the live server: whatever it sends,
valid or not, the server never answers 5xx, and afterwards it is idle with every KV block free.
The same again behind tenant keys: with the right key nothing changes; with no key, a wrong key,
another tenant's key or an oversized header every generated request gets its 401 / 403 / 431, and
random Authorization and X-Tenant values never get past the key check."""

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from live_server import tiny_server
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from engine.openai.server_config import ServerConfig

# a short max_model_len keeps generated requests (max_tokens defaults to the room left) quick
ENGINE = {"max_model_len": 48, "num_kv_blocks": 48, "max_num_seqs": 4}
KEY_A, KEY_B, MAX_HEADER_BYTES = "fuzz-key-alpha", "fuzz-key-beta", 8 << 10
KEYED = ServerConfig(
    max_request_body_bytes=256 << 10,
    max_header_bytes=MAX_HEADER_BYTES,
    tenant_keys={
        "keys": {KEY_A: "alpha", KEY_B: "beta"},
        "tenants": {"default": {"kv_blocks": 48, "max_concurrent": 8}, "beta": {"kv_blocks": 24}},
    },
)


@pytest.fixture(scope="module")
def live():
    with tiny_server(engine_overrides=ENGINE, max_request_body_bytes=256 << 10) as server:
        yield server


@pytest.fixture(scope="module")
def api_schema(live):
    return schemathesis.openapi.from_url(f"{live.url}/openapi.json")


OPERATIONS = [
    ("/v1/completions", "POST"),
    ("/v1/chat/completions", "POST"),
    ("/v1/models", "GET"),
    ("/health", "GET"),
    ("/metrics", "GET"),
]
# GET routes take no input, so there is nothing to make invalid
RUNS = [(path, method, GenerationMode.POSITIVE) for path, method in OPERATIONS] + [
    (path, method, GenerationMode.NEGATIVE) for path, method in OPERATIONS if method == "POST"
]
STATUSES: list[int] = []


@pytest.mark.parametrize("path, method, mode", RUNS, ids=[f"{m} {p} {g.value}" for p, m, g in RUNS])
def test_no_server_errors(api_schema, path, method, mode):
    operation = api_schema[path][method]
    examples = 40 if method == "POST" else 3

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    def call(case):
        response = case.call_and_validate(checks=[not_a_server_error], timeout=30)
        STATUSES.append(response.status_code)
        if response.status_code >= 400:
            assert "error" in response.json(), response.text

    call()


def test_idle_and_healthy_after_fuzzing(live, api_schema):
    assert 200 in STATUSES and 400 in STATUSES, (
        f"the fuzzing reached too few outcomes: {sorted(set(STATUSES))}"
    )
    live.wait_idle()
    assert httpx.get(f"{live.url}/health", timeout=10).status_code == 200
    assert live.serving.engine.num_step_errors == 0


# ---- behind keys ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keyed():
    with tiny_server(engine_overrides=ENGINE, server_config=KEYED) as server:
        yield server


AUTH_CASES = {  # name: (headers, status every /v1 request gets)
    "right key": ({"Authorization": f"Bearer {KEY_A}", "X-Tenant": "alpha"}, None),
    "no key": ({}, 401),
    "wrong key": ({"Authorization": "Bearer not-a-key"}, 401),
    "another tenant's key": ({"Authorization": f"Bearer {KEY_B}", "X-Tenant": "alpha"}, 403),
    "oversized header": (
        {"Authorization": f"Bearer {KEY_A}", "X-Pad": "p" * MAX_HEADER_BYTES},
        431,
    ),
}
AUTH_RUNS = [(name, path, method, mode) for name in AUTH_CASES for path, method, mode in RUNS]
AUTH_STATUSES: list[int] = []


@pytest.mark.parametrize(
    "name, path, method, mode",
    AUTH_RUNS,
    ids=[f"{n}: {m} {p} {g.value}" for n, p, m, g in AUTH_RUNS],
)
def test_auth_paths_under_fuzzing(keyed, name, path, method, mode):
    headers, refused_with = AUTH_CASES[name]
    expected = 431 if refused_with == 431 else refused_with if path.startswith("/v1/") else None
    operation = schemathesis.openapi.from_url(f"{keyed.url}/openapi.json")[path][method]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=12 if method == "POST" else 2,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    def call(case):
        response = case.call_and_validate(headers=headers, checks=[not_a_server_error], timeout=30)
        AUTH_STATUSES.append(response.status_code)
        if expected is not None:
            assert response.status_code == expected, response.text
        elif response.status_code >= 400:
            assert response.status_code not in (401, 403, 431), response.text
        if response.status_code >= 400:
            assert "error" in response.json(), response.text
        assert KEY_A not in response.text and KEY_B not in response.text

    call()


def headers_tenant(tenant: str | None) -> dict:
    return {} if tenant is None else {"X-Tenant": tenant}


# printable ASCII; HTTP clients refuse values with whitespace at either end, so none is generated
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80).map(
    str.strip
)


@given(authorization=HEADER_TEXT, tenant=st.one_of(st.none(), HEADER_TEXT))
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
def test_random_authorization_and_tenant_headers(keyed, authorization, tenant):
    headers = {"Authorization": authorization} | headers_tenant(tenant)
    response = httpx.post(
        f"{keyed.url}/v1/completions",
        json={"prompt": [5], "max_tokens": 1},
        headers=headers,
        timeout=30,
    )
    assert response.status_code == 401 and response.json()["error"]["code"] == 401, response.text
    claimed = httpx.post(
        f"{keyed.url}/v1/completions",
        json={"prompt": [5], "max_tokens": 1},
        timeout=30,
        headers={"Authorization": f"Bearer {KEY_A}"} | headers_tenant(tenant),
    )
    agrees = tenant is None or tenant.strip() in ("", "alpha")
    assert claimed.status_code == (200 if agrees else 403), claimed.text


def test_keyed_server_idle_and_healthy_after_fuzzing(keyed):
    assert {401, 403, 431} <= set(AUTH_STATUSES) and 200 in AUTH_STATUSES, sorted(
        set(AUTH_STATUSES)
    )
    keyed.wait_idle()
    assert httpx.get(f"{keyed.url}/health", timeout=10).status_code == 200
    assert keyed.serving.engine.num_step_errors == 0 and keyed.serving.admission.in_flight == 0
