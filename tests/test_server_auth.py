"""Who gets in and as which tenant: API keys (401), keys bound to tenants (403 on a disagreeing X-Tenant),
open /health and /metrics, the tenant-keys file and its default limits, per-tenant rate limits and
concurrency caps (429 + Retry-After, counted per tenant), and keys never echoed."""

import json

import httpx
import numpy as np
import pytest
from live_server import slow_steps, tiny_server
from pydantic import ValidationError

from engine.openai.auth import KeyRing
from engine.openai.server_config import ServerConfig, TenantKeys, resolve_tenancy

OPEN_KEY, ALPHA_KEY, BETA_KEY, GAMMA_KEY, DELTA_KEY = (
    "open-k3y",
    "alpha-k3y",
    "beta-k3y",
    "gamma-k3y",
    "delta-k3y",
)
TENANT_KEYS = {
    "keys": {ALPHA_KEY: "alpha", BETA_KEY: "beta", GAMMA_KEY: "gamma", DELTA_KEY: "delta"},
    "tenants": {
        "default": {
            "kv_blocks": 64,
            "requests_per_s": 1000,
            "prompt_tokens_per_s": 1e5,
            "max_concurrent": 64,
        },
        "alpha": {"kv_blocks": 4},  # 32 tokens
        "beta": {"requests_per_s": 0.2},  # burst 5 s: one request, then one per 5 s
        "gamma": {"prompt_tokens_per_s": 4},  # burst 5 s: 20 prompt tokens
        "delta": {"max_concurrent": 1},
    },
}
ENGINE = {"max_model_len": 512, "num_kv_blocks": 160, "max_num_seqs": 4}


@pytest.fixture(scope="module")
def server():
    config = ServerConfig(
        api_keys=[OPEN_KEY],
        tenant_keys=TENANT_KEYS,
        rate_limit_burst_s=5,
        retry_after_s=3,
        max_header_bytes=4096,
    )
    with tiny_server(engine_overrides=ENGINE, server_config=config) as live:
        yield live


def bearer(key: str, **extra: str) -> dict:
    return {"Authorization": f"Bearer {key}"} | extra


def body(prompt_len: int = 6, max_tokens: int = 4, seed: int = 0, **extra) -> dict:
    prompt = np.random.default_rng(seed).integers(3, 512, prompt_len).tolist()
    return {"prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True} | extra


def post(
    server, headers: dict, payload: dict | None = None, path: str = "/v1/completions"
) -> httpx.Response:
    return httpx.post(
        server.url + path, json=body() if payload is None else payload, headers=headers, timeout=60
    )


# ---- the settings ----------------------------------------------------------------------------------
def test_tenant_keys_load_from_json_and_yaml(tmp_path):
    (tmp_path / "keys.json").write_text(json.dumps(TENANT_KEYS))
    (tmp_path / "keys.yaml").write_text(
        "keys:\n  k1: team-a\ntenants:\n  default: {max_concurrent: 4}\n"
        "  team-a: {max_concurrent: 2, requests_per_s: 1.5}\n"
    )
    assert TenantKeys.load(tmp_path / "keys.json").tenants["beta"].requests_per_s == 0.2
    from_yaml = ServerConfig(tenant_keys=tmp_path / "keys.yaml").tenant_keys
    assert from_yaml.keys == {"k1": "team-a"} and from_yaml.tenants["team-a"].max_concurrent == 2


@pytest.mark.parametrize(
    "content, words",
    [
        ("{not json", ["keys.json", "not valid JSON"]),
        ('{"keys": {"s3cret value": "a"}}', ["keys entry #1", "without spaces"]),
        ('{"keys": {"s3cret": 5}}', ["keys entry #1", "tenant name"]),
        ('{"tenants": {"a": {"kv_blocks": 0}}}', ["kv_blocks", "greater than or equal to 1"]),
        ('{"tenants": {"a": {"rate": 3}}}', ["rate", "Extra inputs"]),
        ('["a"]', ["list", "expected a mapping"]),
    ],
)
def test_bad_tenant_keys_files_are_named_without_their_keys(tmp_path, content, words):
    path = tmp_path / "keys.json"
    path.write_text(content)
    with pytest.raises(ValueError) as error:
        TenantKeys.load(path)
    for word in words:
        assert word in str(error.value), str(error.value)
    assert "s3cret" not in str(error.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="nope.yaml: cannot be read"):
        ServerConfig(tenant_keys=tmp_path / "nope.yaml")


def test_bad_api_keys_are_named_by_position_never_by_value():
    with pytest.raises(ValidationError) as error:
        ServerConfig(api_keys=["good-key", "bad s3cret"])
    assert "--api-key #2" in str(error.value) and "s3cret" not in str(error.value)
    with pytest.raises(ValidationError, match="also a key in --tenant-keys"):
        ServerConfig(api_keys=[ALPHA_KEY], tenant_keys=TENANT_KEYS)
    assert ALPHA_KEY not in repr(ServerConfig(api_keys=[ALPHA_KEY])) + repr(
        TenantKeys(**TENANT_KEYS)
    )


def test_a_tenant_without_a_limit_gets_the_default_one():
    tenancy = resolve_tenancy(TenantKeys(**TENANT_KEYS), {})
    assert tenancy.limits["beta"].kv_blocks == 64 and tenancy.limits["beta"].requests_per_s == 0.2
    assert tenancy.limits["alpha"].kv_blocks == 4 and tenancy.limits["alpha"].requests_per_s == 1000
    assert tenancy.kv_quota() == {"alpha": 4, "beta": 64, "default": 64, "delta": 64, "gamma": 64}
    assert tenancy.resolve("nobody") == "default" and tenancy.resolve("beta") == "beta"
    assert tenancy.resolve(None) == "default" and tenancy.resolve("  ") == "default"


def test_limits_without_a_default_are_refused_not_left_unlimited():
    with pytest.raises(
        ValueError, match=r"\['a'\] set kv_blocks but the 'default' tenant does not"
    ):
        resolve_tenancy(None, {"a": 4})
    with pytest.raises(ValueError, match="max_concurrent"):
        resolve_tenancy(
            TenantKeys(tenants={"a": {"max_concurrent": 2}, "default": {"kv_blocks": 4}}), {"a": 4}
        )
    with pytest.raises(ValueError, match="in one place"):
        resolve_tenancy(
            TenantKeys(tenants={"a": {"kv_blocks": 2}, "default": {"kv_blocks": 4}}), {"a": 4}
        )


def test_without_limits_or_tenant_keys_x_tenant_is_taken_as_it_is():
    tenancy = resolve_tenancy(None, {})
    assert not tenancy.closed and tenancy.resolve("team-x") == "team-x" and tenancy.kv_quota() == {}


def test_key_ring_matches_keys_and_their_tenants():
    ring = KeyRing(["open"], {"k1": "a"})
    assert ring.lookup(b"open") == (True, None, "key#0")
    assert ring.lookup(b"k1") == (True, "a", "key#1")
    assert ring.lookup(b"k2") == (False, None, "") and ring.lookup(b"") == (False, None, "")
    assert not KeyRing([], {}).enabled


# ---- who gets in -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "headers, problem",
    [
        ({}, "no API key"),
        (bearer("wrong-key"), "not valid"),
        ({"Authorization": f"Basic {ALPHA_KEY}"}, "Bearer <key>"),
        ({"Authorization": "Bearer"}, "Bearer <key>"),
    ],
)
def test_missing_or_wrong_key_gets_401(server, headers, problem):
    for path, method in (
        ("/v1/completions", "POST"),
        ("/v1/chat/completions", "POST"),
        ("/v1/models", "GET"),
        ("/v1/nothing", "GET"),
    ):
        response = httpx.request(
            method, server.url + path, json=body(), headers=headers, timeout=30
        )
        assert response.status_code == 401, (path, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
        error = response.json()["error"]
        assert (
            error["code"] == 401
            and error["type"] == "AuthenticationError"
            and problem in error["message"]
        )
        assert ALPHA_KEY not in response.text


def test_health_and_metrics_stay_open(server):
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200
    assert httpx.get(f"{server.url}/metrics", timeout=10).status_code == 200


def test_an_open_key_serves_any_tenant_and_unknown_tenants_as_default(server):
    assert (
        httpx.get(f"{server.url}/v1/models", headers=bearer(OPEN_KEY), timeout=10).status_code
        == 200
    )
    response = post(
        server, bearer(OPEN_KEY, **{"X-Tenant": "nobody-configured"}), body(max_tokens=3)
    )
    assert response.status_code == 200 and response.json()["usage"]["completion_tokens"] == 3
    assert 'tenant="nobody-configured"' not in httpx.get(f"{server.url}/metrics", timeout=10).text


def test_a_key_decides_the_tenant_and_a_disagreeing_header_gets_403(server):
    assert post(server, bearer(ALPHA_KEY, **{"X-Tenant": "alpha"})).status_code == 200
    refused = post(server, bearer(ALPHA_KEY, **{"X-Tenant": "beta"}))
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert (
        error["type"] == "PermissionDeniedError"
        and "'alpha'" in error["message"]
        and "'beta'" in error["message"]
    )
    # alpha's own KV quota applies, whatever tenant the client would like to be
    too_big = post(server, bearer(ALPHA_KEY), body(prompt_len=30, max_tokens=8))
    assert (
        too_big.status_code == 400
        and "tenant 'alpha' has a quota of 4" in too_big.json()["error"]["message"]
    )


def test_an_open_key_cannot_act_as_a_tenant_with_its_own_key(server):
    claimed = post(
        server, bearer(OPEN_KEY, **{"X-Tenant": "beta"})
    )  # would spend beta's rate limit
    assert claimed.status_code == 403, claimed.text
    assert (
        "'beta'" in claimed.json()["error"]["message"]
        and "--open-keys-claim-tenants" in claimed.text
    )
    assert post(server, bearer(OPEN_KEY, **{"X-Tenant": "nobody-configured"})).status_code == 200


def test_open_keys_may_claim_tenants_when_configured():
    config = ServerConfig(
        api_keys=[OPEN_KEY], tenant_keys=TENANT_KEYS, open_keys_claim_tenants=True
    )
    with tiny_server(engine_overrides=ENGINE, server_config=config) as live:
        # served as alpha: alpha's own KV quota (4 blocks) applies
        too_big = post(
            live, bearer(OPEN_KEY, **{"X-Tenant": "alpha"}), body(prompt_len=30, max_tokens=8)
        )
        assert too_big.status_code == 400 and "tenant 'alpha'" in too_big.text


def test_oversized_headers_get_431_before_the_key_is_looked_at(server):
    for headers in (bearer("x" * 8000), bearer(ALPHA_KEY, **{"X-Pad": "y" * 8000})):
        for path in ("/v1/completions", "/health"):
            response = httpx.post(server.url + path, json=body(), headers=headers, timeout=30)
            assert response.status_code == 431, response.text
            assert "4096" in response.json()["error"]["message"]


def test_refusals_are_counted_by_reason(server):
    before = {
        r: server.metric("surgeplan:requests_rejected_total", reason=r)
        for r in ("unauthorized", "forbidden")
    }
    post(server, {})
    post(server, bearer(BETA_KEY, **{"X-Tenant": "gamma"}))
    assert (
        server.metric("surgeplan:requests_rejected_total", reason="unauthorized")
        == before["unauthorized"] + 1
    )
    assert (
        server.metric("surgeplan:requests_rejected_total", reason="forbidden")
        == before["forbidden"] + 1
    )
    assert (
        server.metric("surgeplan:http_responses_total", route="/v1/completions", status="401") >= 1
    )


# ---- fair under pressure ---------------------------------------------------------------------------
def test_request_rate_limit_gets_429_with_retry_after_per_tenant(server):
    first = post(server, bearer(BETA_KEY))
    second = post(server, bearer(BETA_KEY))
    assert first.status_code == 200, first.text
    assert second.status_code == 429, second.text
    assert 1 <= int(second.headers["retry-after"]) <= 5
    error = second.json()["error"]
    assert (
        error["type"] == "RateLimitError"
        and "beta" in error["message"]
        and "requests_per_s" in error["message"]
    )
    assert (
        server.metric(
            "surgeplan:tenant_requests_rejected_total", tenant="beta", limit="requests_per_s"
        )
        == 1
    )
    assert post(server, bearer(ALPHA_KEY)).status_code == 200  # other tenants are not held back


def test_prompt_token_rate_limit(server):
    assert post(server, bearer(GAMMA_KEY), body(prompt_len=15)).status_code == 200
    refused = post(server, bearer(GAMMA_KEY), body(prompt_len=15))
    assert (
        refused.status_code == 429 and "prompt_tokens_per_s" in refused.json()["error"]["message"]
    )
    assert int(refused.headers["retry-after"]) >= 1
    assert (
        server.metric(
            "surgeplan:tenant_requests_rejected_total", tenant="gamma", limit="prompt_tokens_per_s"
        )
        == 1
    )


def test_max_concurrent_counts_streams_until_their_client_leaves(server):
    with slow_steps(server, 0.01), httpx.Client(base_url=server.url, timeout=60) as client:
        with client.stream(
            "POST",
            "/v1/completions",
            headers=bearer(DELTA_KEY),
            json=body(max_tokens=480, stream=True),
        ) as streaming:
            assert streaming.status_code == 200
            lines = streaming.iter_lines()  # held: a dropped iterator would close the stream
            assert next(line for line in lines if line.startswith("data:"))
            refused = client.post("/v1/completions", headers=bearer(DELTA_KEY), json=body())
            assert (
                refused.status_code == 429
                and "max_concurrent=1" in refused.json()["error"]["message"]
            )
            assert refused.headers["retry-after"] == "3"
    server.wait_idle()
    assert (
        server.serving.admission.in_flight == 0
        and server.metric("surgeplan:requests_in_flight") == 0
    )
    assert post(server, bearer(DELTA_KEY)).status_code == 200
    assert (
        server.metric(
            "surgeplan:tenant_requests_rejected_total", tenant="delta", limit="max_concurrent"
        )
        == 1
    )
