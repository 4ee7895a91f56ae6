"""Schemathesis over the server's own OpenAPI schema, against the live server: whatever it sends,
valid or not, the server never answers 5xx, and afterwards it is idle with every KV block free."""
import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from live_server import tiny_server

# a short max_model_len keeps generated requests (max_tokens defaults to the room left) quick
ENGINE = {"max_model_len": 48, "num_kv_blocks": 48, "max_num_seqs": 4}


@pytest.fixture(scope="module")
def live():
    with tiny_server(engine_overrides=ENGINE, max_request_body_bytes=256 << 10) as server:
        yield server


@pytest.fixture(scope="module")
def api_schema(live):
    return schemathesis.openapi.from_url(f"{live.url}/openapi.json")


OPERATIONS = [("/v1/completions", "POST"), ("/v1/chat/completions", "POST"), ("/v1/models", "GET"),
              ("/health", "GET"), ("/metrics", "GET")]
# GET routes take no input, so there is nothing to make invalid
RUNS = [(path, method, GenerationMode.POSITIVE) for path, method in OPERATIONS] + \
       [(path, method, GenerationMode.NEGATIVE) for path, method in OPERATIONS if method == "POST"]
STATUSES: list[int] = []


@pytest.mark.parametrize("path, method, mode", RUNS, ids=[f"{m} {p} {g.value}" for p, m, g in RUNS])
def test_no_server_errors(api_schema, path, method, mode):
    operation = api_schema[path][method]
    examples = 40 if method == "POST" else 3

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def call(case):
        response = case.call_and_validate(checks=[not_a_server_error], timeout=30)
        STATUSES.append(response.status_code)
        if response.status_code >= 400:
            assert "error" in response.json(), response.text

    call()


def test_idle_and_healthy_after_fuzzing(live, api_schema):
    assert 200 in STATUSES and 400 in STATUSES, f"the fuzzing reached too few outcomes: {sorted(set(STATUSES))}"
    live.wait_idle()
    assert httpx.get(f"{live.url}/health", timeout=10).status_code == 200
    assert live.serving.engine.num_step_errors == 0
