"""The abuse set: can one client slow everyone else? A real `surgeplan serve` process on loopback,
two open --api-key keys (no tenant limits: X-Tenant is free-form, the case that once grew state
per name), one the attackers', one the victim's (another client: the server shares body bytes out
per client, an API key and an address), and a step window behind them (--record-steps), attacked
one attack at a time (abuse_attacks.py) while the victim sends ordinary completions one after
another. For each attack:
the victim's median latency alone just before and just after it (the same run's idle figure,
bracketing the attack) and under it, what
the attackers got (statuses; every error in OpenAI's shape), and the server's RSS; afterwards the
server must be idle, have logged no traceback, and exit 0 on SIGTERM. tests/test_server_abuse.py
runs a short version in CI.

    .venv/bin/python benchmarks/abuse.py [--attack-s 20] [--victims 10] [--json out.json]
"""

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script: import the repository's packages, not benchmarks/
    sys.path[0] = str(REPO)

from benchmarks.abuse_attacks import ATTACKS, Target, run_attack  # noqa: E402
from benchmarks.soak import ServerProcess  # noqa: E402

KEY = "abuse-open-key"  # the attackers' (those that send a key)
VICTIM_KEY = "abuse-victim-key"  # another client: its own open key


@dataclass
class AbuseSettings:
    attack_s: float = 20.0  # each attack runs this long
    victims: int = 10  # victim requests, idle and under each attack
    victim_max_tokens: int = 32
    attacks: list[str] = field(default_factory=lambda: list(ATTACKS))
    ratio_bound: float = 2.0  # victim latency under attack / idle
    slack_s: float = 0.0  # added to the bound (tests on a noisy host)
    retries: int = 0  # an attack over the bound is measured again (idle too)
    repeats: int = 1  # each attack measured this many times (each with its idle): median ratio
    rss_growth_bound_bytes: int = (
        64 << 20
    )  # server RSS peak during an attack over its RSS before it
    header_timeout_s: float = 2.0  # the server's --header-timeout and --body-timeout
    log_dir: str | None = None


def serve_options(settings: AbuseSettings) -> list[str]:
    return [
        "--api-key",
        KEY,
        "--api-key",
        VICTIM_KEY,
        "--record-steps",
        "4096",
        "--header-timeout",
        str(settings.header_timeout_s),
        "--body-timeout",
        str(settings.header_timeout_s),
    ]


async def _victim(
    target: Target, settings: AbuseSettings, stop_at: float | None = None
) -> list[float]:
    """Sequential completions (16 prompt tokens, `victim_max_tokens` out); their latencies."""
    body = {
        "prompt": list(range(10, 26)),
        "max_tokens": settings.victim_max_tokens,
        "ignore_eos": True,
    }
    latencies = []
    async with httpx.AsyncClient(base_url=target.url, timeout=120) as client:
        for _ in range(settings.victims):
            start = time.monotonic()
            response = await client.post("/v1/completions", json=body, headers=target.auth)
            latencies.append(time.monotonic() - start)
            if response.status_code != 200:
                raise RuntimeError(f"the victim got {response.status_code}: {response.text[:300]}")
            if stop_at is not None and time.monotonic() > stop_at:
                break
    return latencies


async def _rss_peak(server: ServerProcess, stop: asyncio.Event) -> int:
    peak = server.rss_bytes()
    while not stop.is_set():
        peak = max(peak, server.rss_bytes())
        await asyncio.sleep(0.1)
    return peak


async def _one_attack(
    name: str,
    target: Target,
    server: ServerProcess,
    settings: AbuseSettings,
    attackers: ProcessPoolExecutor,
) -> dict:
    victim = Target(target.url, target.port, VICTIM_KEY)
    idle = await _victim(victim, settings)
    rss_before = server.rss_bytes()
    stop = asyncio.Event()
    sampler = asyncio.create_task(_rss_peak(server, stop))
    start = time.monotonic()
    stop_at = start + settings.attack_s
    attack = asyncio.get_running_loop().run_in_executor(
        attackers, run_attack, name, target, time.time() + settings.attack_s
    )
    await asyncio.sleep(min(2.0, settings.attack_s / 3))  # the attack in full swing first
    under = await _victim(victim, settings, stop_at)
    seen = await attack
    stop.set()
    peak = await sampler
    # idle again once the attack is over: the baseline brackets it, so a neighbour's load that
    # comes or goes during the attack moves both sides (on a shared host it swings 3-10x)
    idle_after = await _victim(victim, settings)
    idle_s, under_s = statistics.median(idle + idle_after), statistics.median(under)
    return {
        "attack": name,
        "victim_idle_s": idle_s,
        "victim_idle_before_after_s": [statistics.median(idle), statistics.median(idle_after)],
        "victim_under_attack_s": under_s,
        "ratio": under_s / idle_s,
        "victim_requests": [len(idle) + len(idle_after), len(under)],
        "attack_sent": seen.sent,
        "statuses": dict(seen.statuses),
        "not_openai_errors": seen.not_openai_errors[:5],
        "rss_before_bytes": rss_before,
        "rss_peak_bytes": peak,
        "attack_s": time.monotonic() - start,
        **seen.extra,
    }


def sigterm_storm(
    server: ServerProcess, every_s: float = 0.01, timeout_s: float = 60.0
) -> tuple[int, int]:
    """SIGTERM, then again every 10 ms until the server has exited (repeated signals during its
    drain and teardown must not change its exit status 0); (exit status, signals sent)."""
    deadline, signals = time.monotonic() + timeout_s, 0
    while server.process.poll() is None and time.monotonic() < deadline:
        server.process.send_signal(signal.SIGTERM)
        signals += 1
        time.sleep(every_s)
    return server.stop(), signals


def _too_slow(row: dict, settings: AbuseSettings) -> bool:
    bound_s = settings.ratio_bound * row["victim_idle_s"] + settings.slack_s
    return row["attack"] != "cpu_control" and row["victim_under_attack_s"] > bound_s


def _median_row(rows: list[dict]) -> dict:
    """One attack measured several times: the measurement with the median ratio (its idle and
    under-attack latencies), with every ratio, and what the attackers sent and got in all."""
    by_ratio = sorted(rows, key=lambda row: row["ratio"])
    statuses: dict[str, int] = {}
    for row in rows:
        for code, count in row["statuses"].items():
            statuses[code] = statuses.get(code, 0) + count
    return by_ratio[(len(rows) - 1) // 2] | {
        "ratios": [row["ratio"] for row in by_ratio],
        "attack_sent": sum(row["attack_sent"] for row in rows),
        "statuses": statuses,
        "not_openai_errors": [e for row in rows for e in row["not_openai_errors"]][:5],
        "rss_before_bytes": min(row["rss_before_bytes"] for row in rows),
        "rss_peak_bytes": max(row["rss_peak_bytes"] for row in rows),
        "attack_s": sum(row["attack_s"] for row in rows),
    }


def run_abuse(settings: AbuseSettings) -> dict:
    with tempfile.TemporaryDirectory(prefix="surgeplan-abuse-") as tmp:
        workdir = Path(settings.log_dir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        server = ServerProcess(serve_options(settings), workdir / "serve.log")
        rows = []
        # the attackers run in their own process: their client work must not stall the victim's.
        # Forked, not spawned: a spawned child re-imports `__main__`, which under pytest may be a
        # script another test left there (streamlit's AppTest), and then dies on start.
        attackers = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
        try:
            attackers.submit(sum, [1]).result()  # started while the server loads
            server.wait_healthy()
            target = Target(server.url, server.port, KEY)
            asyncio.run(_victim(Target(server.url, server.port, VICTIM_KEY), settings))  # warm-up
            for name in settings.attacks:

                def measure(name=name) -> dict:
                    return _median_row(
                        [
                            asyncio.run(_one_attack(name, target, server, settings, attackers))
                            for _ in range(settings.repeats)
                        ]
                    )

                row = measure()
                for retry in range(settings.retries):
                    if not _too_slow(row, settings):
                        break
                    row = measure() | {"tries": retry + 2}
                rows.append(row)
            after = server.metrics()
        except BaseException:
            server.stop()
            raise
        finally:
            attackers.shutdown(cancel_futures=True)
        exit_status, signals = sigterm_storm(server)
        log = server.log_path.read_text()
    problems = []
    for row in rows:
        if _too_slow(row, settings):
            problems.append(
                f"{row['attack']}: the victim took {row['ratio']:.2f}x its idle latency, over "
                f"{settings.ratio_bound:g}x + {settings.slack_s:g} s"
            )
        if row["rss_peak_bytes"] - row["rss_before_bytes"] > settings.rss_growth_bound_bytes:
            problems.append(
                f"{row['attack']}: RSS grew "
                f"{(row['rss_peak_bytes'] - row['rss_before_bytes']) / 2**20:.0f}"
                f" MiB, over {settings.rss_growth_bound_bytes / 2**20:.0f} MiB"
            )
        if row["not_openai_errors"]:
            problems.append(
                f"{row['attack']}: answers not in OpenAI's error shape: {row['not_openai_errors']}"
            )
        if any(code.startswith("5") and code != "503" for code in row["statuses"]):
            problems.append(f"{row['attack']}: server errors {row['statuses']}")
    for name in (
        "surgeplan:requests_in_flight",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
    ):
        if after.total(name) != 0:
            problems.append(f"after the attacks {name} is {after.total(name)}, expected 0")
    if exit_status != 0:
        problems.append(f"after {signals} SIGTERMs the server exited with {exit_status}")
    if "Traceback" in log:
        problems.append(f"the server logged a traceback: {log[log.index('Traceback') :][:2000]}")
    return {
        "settings": asdict(settings),
        "rows": rows,
        "exit_status": exit_status,
        "sigterms": signals,
        "problems": problems,
    }


def _statuses(statuses: dict) -> str:
    return ", ".join(f"{code} x{count}" for code, count in sorted(statuses.items()))


def report_table(report: dict) -> str:
    s, mib = report["settings"], 2**20
    lines = [
        f"abuse: each attack {s['attack_s']:g} s (measured {s.get('repeats', 1)} times, median "
        f"ratio shown) beside a victim sending {s['victims']} "
        f"completions in turn (16 prompt tokens, {s['victim_max_tokens']} out); tiny (dummy "
        f"weights), one OpenMP thread; --header-timeout {s['header_timeout_s']:g} --body-timeout "
        f"{s['header_timeout_s']:g}; bound: victim within {s['ratio_bound']:g}x of its idle "
        "latency measured just before and after",
        "",
        f"{'attack':<16}{'victim idle → under attack':>30}{'ratio':>8}{'sent':>7}  "
        f"{'RSS before → peak':<20}attackers got",
        "-" * 120,
    ]
    for row in report["rows"]:
        idle_ms, under_ms = row["victim_idle_s"] * 1e3, row["victim_under_attack_s"] * 1e3
        rss = f"{row['rss_before_bytes'] / mib:>5.0f} → {row['rss_peak_bytes'] / mib:>4.0f} MiB"
        tries = f" (measured {row['tries']} times)" if "tries" in row else ""
        if len(row["ratios"]) > 1:
            tries += " (ratios " + ", ".join(f"{r:.2f}" for r in row["ratios"]) + ")"
        lines.append(
            f"{row['attack']:<16}{idle_ms:>14.0f} ms → {under_ms:>6.0f} ms"
            f"{row['ratio']:>7.2f}x{row['attack_sent']:>7}  {rss}     "
            f"{_statuses(row['statuses'])}{tries}"
        )
        if "metrics_bytes_after" in row:
            lines.append(
                f"{'':<16}/metrics {row['metrics_bytes_before'] / 1024:.0f} KiB before, "
                f"{row['metrics_bytes_after'] / 1024:.0f} KiB after"
            )
    verdict = "all passed" if not report["problems"] else f"{len(report['problems'])} FAILED"
    lines.append(
        f"SIGTERM every 10 ms afterwards ({report['sigterms']} sent): exit status "
        f"{report['exit_status']}; checks: {verdict}"
    )
    return "\n".join(lines) + "".join(f"\n  problem: {p}" for p in report["problems"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attack-s", type=float, default=20.0, help="seconds each attack runs")
    parser.add_argument(
        "--victims", type=int, default=10, help="victim requests, idle and under each attack"
    )
    parser.add_argument(
        "--attack", action="append", choices=list(ATTACKS), help="run only these (repeatable)"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="measure each attack this many times, each with its own idle baseline; the table "
        "shows the median ratio (on a shared host single measurements swing several times)",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--log-dir", default=None, help="keep the server's log here")
    args = parser.parse_args()
    from benchmarks.machine import describe_machine

    settings = AbuseSettings(
        attack_s=args.attack_s,
        victims=args.victims,
        log_dir=args.log_dir,
        attacks=args.attack or list(ATTACKS),
        repeats=args.repeats,
    )
    report = run_abuse(settings)
    print(describe_machine())
    print(report_table(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    sys.exit(1 if report["problems"] else 0)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
