"""A bounded soak of `surgeplan serve`: a real server process on loopback, behind tenant keys with
per-tenant limits, offered `--load` times its measured capacity by three tenants for `--duration`
seconds, with random hang-ups, cancels, tight deadlines and bad requests. Afterwards it checks that
nothing was lost (see soak_accounting.py for the identities between clients and /metrics), that the
KV pool is whole, that the server's RSS did not grow past a stated bound after warm-up, and that
SIGTERM drains it to exit status 0; then prints the figures.

Capacity is measured first on a server of the same settings without limits: requests of the soak's
lengths, `max_num_seqs` at a time, closed loop. tests/test_server_soak.py runs a short soak in CI.

    .venv/bin/python benchmarks/soak.py [--duration 180] [--load 2.0] [--seed 0] [--json out.json]
"""

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx
import numpy as np

REPO = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script: import the repository's packages, not benchmarks/
    sys.path[0] = str(REPO)

from benchmarks.soak_accounting import Snapshot, account, format_table  # noqa: E402
from benchmarks.soak_traffic import (  # noqa: E402
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    TENANTS,
    VOCAB_HIGH,
    VOCAB_LOW,
    api_key,
    draw_plan,
    send,
)
from engine.openai.launcher import ServerProcess as Server  # noqa: E402

MAX_MODEL_LEN, MAX_NUM_SEQS, NUM_KV_BLOCKS, BLOCK_SIZE, MAX_WAITING, MAX_HEADER_BYTES = (
    256,
    8,
    128,
    8,
    16,
    8192,
)
SERVE = [
    "--model",
    "tiny",
    "--load-format",
    "dummy",
    "--max-model-len",
    str(MAX_MODEL_LEN),
    "--block-size",
    str(BLOCK_SIZE),
    "--num-kv-blocks",
    str(NUM_KV_BLOCKS),
    "--max-num-seqs",
    str(MAX_NUM_SEQS),
    "--max-waiting-requests",
    str(MAX_WAITING),
    "--max-header-bytes",
    str(MAX_HEADER_BYTES),
    "--drain-timeout",
    "10",
    "--uvicorn-log-level",
    "warning",
]


@dataclass
class SoakSettings:
    duration_s: float = 180.0
    load: float = 2.0  # offered request rate / measured capacity
    seed: int = 0
    max_requests: int = 50_000  # the loop's bound in count (duration is the other)
    max_client_tasks: int = 96  # requests outstanding at once; arrivals wait past it
    warmup_share: float = 0.25  # RSS growth is measured from this share of the duration
    rss_growth_bound_bytes: int = 24 << 20
    probe_s: float = 6.0
    capacity_req_per_s: float | None = None  # measured when None
    settle_timeout_s: float = 90.0
    log_dir: str | None = None  # keep the servers' logs there (default: a temporary folder)


def tenant_keys(capacity_req_per_s: float) -> dict:
    """alpha runs on the default limits; beta is held to a share of the capacity in requests/s; gamma
    to two requests at a time, a small KV quota and a prompt-token rate."""
    return {
        "keys": {api_key(t): t for t in TENANTS},
        "tenants": {
            "default": {
                "kv_blocks": NUM_KV_BLOCKS // 2,
                "requests_per_s": 1000.0,
                "prompt_tokens_per_s": 1e6,
                "max_concurrent": 64,
            },
            "beta": {"requests_per_s": round(0.3 * capacity_req_per_s, 2)},
            "gamma": {
                "max_concurrent": 2,
                "kv_blocks": NUM_KV_BLOCKS // 4,
                "prompt_tokens_per_s": round(8 * capacity_req_per_s, 1),
            },
        },
    }


class ServerProcess(Server):
    """The soak's server: `SERVE` settings plus `options`, its output in `log_path`. One OpenMP
    thread: the server shares the machine's cores with the clients, and two OpenMP threads per step
    spin against them (steps of the tiny model measured 4x slower that way on 2 cores)."""

    def __init__(self, options: list[str], log_path: Path):
        super().__init__([*SERVE, *options], log_path, env={"OMP_NUM_THREADS": "1"})

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS in /proc")

    def metrics(self) -> Snapshot:
        return Snapshot(httpx.get(f"{self.url}/metrics", timeout=30).text)


async def _closed_loop(url: str, seconds: float, seed: int) -> float:
    """Requests of the soak's lengths, MAX_NUM_SEQS at a time for `seconds`: completed per second."""
    rng, done = np.random.default_rng(seed), 0
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:

        async def worker() -> None:
            nonlocal done
            while time.monotonic() < stop:
                prompt = rng.integers(
                    VOCAB_LOW, VOCAB_HIGH, int(rng.integers(*PROMPT_TOKENS))
                ).tolist()
                response = await client.post(
                    "/v1/completions",
                    json={
                        "prompt": prompt,
                        "max_tokens": int(rng.integers(*OUTPUT_TOKENS)),
                        "ignore_eos": True,
                    },
                )
                done += response.status_code == 200

        start = time.monotonic()
        stop = start + seconds
        await asyncio.gather(*(worker() for _ in range(MAX_NUM_SEQS)))
        return done / (time.monotonic() - start)


def measure_capacity(settings: SoakSettings, workdir: Path) -> float:
    server = ServerProcess([], workdir / "probe.log")
    try:
        server.wait_healthy()
        asyncio.run(_closed_loop(server.url, 1.0, settings.seed + 1))  # first-call allocations
        return asyncio.run(_closed_loop(server.url, settings.probe_s, settings.seed + 2))
    finally:
        server.stop()


async def _offer(
    settings: SoakSettings, server: ServerProcess, rate_per_s: float, rss: list
) -> tuple[list, dict]:
    """Poisson arrivals at `rate_per_s`, bounded in count and in time (planned and real: a client that
    falls behind its schedule stops at the same time); (records, pacing figures)."""
    rng = np.random.default_rng(settings.seed)
    tasks: set[asyncio.Task] = set()
    waited = 0
    # idle connections are dropped well before uvicorn's 5 s keep-alive timeout closes them: a request
    # written into a connection the server is closing at that moment is lost by HTTP/1.1 itself
    limits = httpx.Limits(
        max_connections=None,
        max_keepalive_connections=settings.max_client_tasks,
        keepalive_expiry=1.0,
    )
    async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:
        start = time.monotonic()
        sampler = asyncio.create_task(_sample_rss(server, start, rss))
        arrival_s, records = 0.0, []
        for index in range(settings.max_requests):
            arrival_s += rng.exponential(1 / rate_per_s)
            if arrival_s > settings.duration_s or time.monotonic() - start > settings.duration_s:
                break
            await asyncio.sleep(max(0.0, start + arrival_s - time.monotonic()))
            if len(tasks) >= settings.max_client_tasks:
                waited += 1
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            task = asyncio.create_task(
                send(client, draw_plan(rng, index, MAX_MODEL_LEN, MAX_HEADER_BYTES))
            )
            tasks.add(task)
            task.add_done_callback(lambda t: (tasks.discard(t), records.append(t.result())))
        sending_s = time.monotonic() - start
        if tasks:
            await asyncio.wait(tasks, timeout=settings.settle_timeout_s)
        sampler.cancel()
    pacing = {
        "arrivals_that_waited_for_a_client": waited,
        "sending_s": sending_s,
        "settling_s": time.monotonic() - start - sending_s,
        "unfinished_client_tasks": len(tasks),
    }
    return sorted(records, key=lambda r: r.index), pacing


async def _sample_rss(server: ServerProcess, start: float, rss: list) -> None:
    while True:
        rss.append((time.monotonic() - start, server.rss_bytes()))
        await asyncio.sleep(0.5)


def _wait_idle(server: ServerProcess, timeout_s: float) -> Snapshot:
    deadline = time.monotonic() + timeout_s
    while True:
        snap = server.metrics()
        busy = (
            snap.total("surgeplan:requests_in_flight")
            + snap.total("vllm:num_requests_running")
            + snap.total("vllm:num_requests_waiting")
            + snap.total("vllm:kv_cache_usage_perc")
        )
        if busy == 0 or time.monotonic() > deadline:
            return snap
        time.sleep(0.1)


def run_soak(settings: SoakSettings) -> dict:
    with tempfile.TemporaryDirectory(prefix="surgeplan-soak-") as tmp:
        workdir = Path(settings.log_dir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        capacity = settings.capacity_req_per_s or measure_capacity(settings, workdir)
        keys_path = workdir / "tenant-keys.json"
        keys_path.write_text(json.dumps(tenant_keys(capacity)))
        server = ServerProcess(["--tenant-keys", str(keys_path)], workdir / "serve.log")
        try:
            server.wait_healthy()
            rss_start = server.rss_bytes()
            before, rss = server.metrics(), []
            records, pacing = asyncio.run(_offer(settings, server, settings.load * capacity, rss))
            after = _wait_idle(server, settings.settle_timeout_s)
            rss_end = server.rss_bytes()
        except BaseException:
            server.stop()
            raise
        exit_status = server.stop()
        log_tail = server.log_path.read_text()[-3000:]
    figures, problems = account(records, before, after)
    warm = [b for t, b in rss if t >= settings.warmup_share * settings.duration_s] or [rss_end]
    rss_warm = warm[0]
    problems += _idle_problems(after)
    if rss_end - rss_warm > settings.rss_growth_bound_bytes:
        problems.append(
            f"RSS grew {(rss_end - rss_warm) / 2**20:.1f} MiB after warm-up, over the bound of "
            f"{settings.rss_growth_bound_bytes / 2**20:.0f} MiB"
        )
    if exit_status != 0:
        problems.append(f"after SIGTERM the server exited with {exit_status}: {log_tail}")
    if "Traceback" in log_tail:
        problems.append(f"the server logged a traceback: {log_tail}")
    if pacing["unfinished_client_tasks"]:
        problems.append(
            f"{pacing['unfinished_client_tasks']} client requests were still open "
            f"{settings.settle_timeout_s:g} s after the last arrival"
        )
    figures |= {
        "capacity_req_per_s": capacity,
        "planned_req_per_s": settings.load * capacity,
        "offered_req_per_s": len(records) / pacing["sending_s"],
        **pacing,
        "rss_start_bytes": rss_start,
        "rss_after_warmup_bytes": rss_warm,
        "rss_end_bytes": rss_end,
        "rss_peak_bytes": max([b for _, b in rss] + [rss_end]),
        "exit_status": exit_status,
    }
    return {"settings": asdict(settings), "figures": figures, "problems": problems}


def _idle_problems(after: Snapshot) -> list[str]:
    problems = []
    for name in (
        "surgeplan:requests_in_flight",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
    ):
        if after.total(name) != 0:
            problems.append(f"after the soak {name} is {after.total(name)}, expected 0")
    held = {t: v for t, v in after.by("surgeplan:tenant_kv_blocks", "tenant").items() if v}
    if held:
        problems.append(f"KV blocks still held after the soak: {held}")
    return problems


def report_table(report: dict) -> str:
    f, s = report["figures"], report["settings"]
    mib = 2**20
    header = [
        f"soak: {f['sending_s']:.0f} s offered {f['offered_req_per_s']:.1f} req/s = "
        f"{f['offered_req_per_s'] / f['capacity_req_per_s']:.1f}x the measured capacity of "
        f"{f['capacity_req_per_s']:.1f} req/s (planned {s['load']:g}x); tiny (dummy weights), "
        f"{NUM_KV_BLOCKS} KV blocks x {BLOCK_SIZE}, max_num_seqs {MAX_NUM_SEQS}, --max-waiting-requests "
        f"{MAX_WAITING}; tenants alpha (default limits), beta (requests/s), gamma (2 concurrent, prompt "
        f"tokens/s, KV quota); seed {s['seed']}",
        "",
    ]
    f["extra_rows"] = [
        (
            "server RSS start / after warm-up / end",
            f"{f['rss_start_bytes'] / mib:.0f} / "
            f"{f['rss_after_warmup_bytes'] / mib:.0f} / {f['rss_end_bytes'] / mib:.0f} MiB (peak "
            f"{f['rss_peak_bytes'] / mib:.0f}; bound: +{s['rss_growth_bound_bytes'] / mib:.0f} MiB after warm-up)",
        ),
        (
            "KV pool after the soak",
            "whole"
            if not any("KV" in p or "kv_cache" in p for p in report["problems"])
            else "NOT whole",
        ),
        ("SIGTERM: drain, exit status", f["exit_status"]),
        ("checks", "all passed" if not report["problems"] else f"{len(report['problems'])} FAILED"),
    ]
    return format_table(f, header) + "".join(f"\n  problem: {p}" for p in report["problems"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=180.0, help="seconds of offered load")
    parser.add_argument("--load", type=float, default=2.0, help="offered rate / measured capacity")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--capacity", type=float, default=None, help="req/s; measured when omitted")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--log-dir", default=None, help="keep the servers' logs and tenant-keys file here"
    )
    args = parser.parse_args()
    from benchmarks.machine import describe_machine

    report = run_soak(
        SoakSettings(
            duration_s=args.duration,
            load=args.load,
            seed=args.seed,
            capacity_req_per_s=args.capacity,
            log_dir=args.log_dir,
        )
    )
    print(describe_machine())
    print(report_table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    sys.exit(1 if report["problems"] else 0)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
