"""`surgeplan serve` as a user starts it: vLLM's option names, a real process, a clean stop."""

import signal
import subprocess
import sys
import time

import httpx
import pytest
import typer
from live_server import free_port

from engine.openai.cli import parse_bytes, parse_quotas


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1073741824", 2**30),
        ("8GiB", 8 * 2**30),
        ("512MiB", 512 * 2**20),
        ("2GB", 2 * 10**9),
        ("1.5k", 1500),
        ("1e9", 10**9),
    ],
)
def test_sizes_parse(text, expected):
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "12 parsecs", "-5GiB"])
def test_bad_sizes_are_refused(text):
    with pytest.raises(typer.BadParameter, match="expected bytes"):
        parse_bytes(text)


def test_quotas_parse_and_bad_ones_are_named():
    assert parse_quotas(["a=4", "team-b=16"]) == {"a": 4, "team-b": 16}
    for bad in ("a", "=4", "a=0", "a=x"):
        with pytest.raises(typer.BadParameter, match="TENANT=BLOCKS"):
            parse_quotas([bad])


def serve(*options: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine.openai.cli",
            "--model",
            "tiny",
            "--load-format",
            "dummy",
            *options,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_serve_starts_answers_and_stops():
    port = free_port()
    server = serve(
        "--max-model-len",
        "64",
        "--num-kv-blocks",
        "32",
        "--block-size",
        "8",
        "--max-num-seqs",
        "4",
        "--served-model-name",
        "my-tiny",
        "--tenant-kv-quota",
        "a=4",
        "--tenant-kv-quota",
        "default=32",
        "--max-waiting-requests",
        "8",
        "--port",
        str(port),
        "--uvicorn-log-level",
        "warning",
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while server.poll() is None and time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        assert httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["id"] == "my-tiny"
        answer = httpx.post(
            f"{url}/v1/completions",
            json={"model": "my-tiny", "prompt": "hi", "max_tokens": 3, "ignore_eos": True},
            timeout=30,
        )
        assert answer.json()["usage"]["completion_tokens"] == 3
        too_big = httpx.post(
            f"{url}/v1/completions",
            json={"prompt": [5] * 30, "max_tokens": 10},
            headers={"X-Tenant": "a"},
            timeout=30,
        )
        assert too_big.status_code == 400 and "quota of 4" in too_big.json()["error"]["message"]
    finally:
        server.send_signal(signal.SIGINT)  # Ctrl-C drains like SIGTERM (test_server_drain.py)
        output, _ = server.communicate(timeout=30)
    # nothing in flight: the drain ends at once and the server exits cleanly
    assert server.returncode == 0 and "Traceback" not in output, output


def test_bad_engine_option_exits_with_the_reason():
    result = serve("--policy", "sideways", "--port", str(free_port()))
    output, _ = result.communicate(timeout=120)
    assert result.returncode == 2 and "policy" in output and "continuous" in output
