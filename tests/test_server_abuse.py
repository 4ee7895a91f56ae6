"""The abuse set, short (benchmarks/abuse.py runs the long one and prints docs/measured/abuse.md's table): a
real server process, each attack of issue 24 run for a couple of seconds beside a victim sending
ordinary completions from its own key (another client). Under every attack the victim's median
latency stays within a bound of its idle latency measured just before and after in the same run
(2x in the benchmark; here 4x plus 1 s, an attack over it measured once more, for a shared 2-core
CI host, where a process merely busy on
the CPU slowed the victim 2.7x in one measurement and other jobs swung its idle latency 60-440
ms; the defects this guards against cost 10-77x, for as long as the attack lasted), every answer
the attackers get is an error in OpenAI's shape (never a 500 or a traceback), the server's RSS
stays within 64 MiB of where it was, and a SIGTERM storm at the end (one every 10 ms through the
drain and the teardown) still ends in exit status 0."""

import sys
from dataclasses import replace
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

from benchmarks.abuse import AbuseSettings, report_table, run_abuse  # noqa: E402
from benchmarks.abuse_attacks import ATTACKS  # noqa: E402

SHORT = AbuseSettings(
    attack_s=1.0,
    victims=3,
    ratio_bound=4.0,
    slack_s=1.0,
    retries=1,
    header_timeout_s=0.6,
    attacks=[name for name in ATTACKS if name != "cpu_control"],
)


@pytest.mark.soak
def test_no_attack_slows_the_victim_past_its_bound():
    report = run_abuse(SHORT)
    table = report_table(report)
    assert report["problems"] == [], table
    rows = {row["attack"]: {code for code in row["statuses"]} for row in report["rows"]}
    # each attack reached the defence it is meant to meet (a 4 MB body is over the body limit,
    # 413; any body may meet the body deadline, 408, on a busy host, or its client's share of body
    # bytes, 429, and a refusal may reach the client as a closed connection when unread bytes turn
    # the close into a reset; valid requests at the caps get 200)
    expected = {
        "stop_token_ids": "413",
        "stop_strings": "413",
        "debug_steps": "401",
        "header_flood": "431",
        "slowloris": "408",
        "surrogates": "400",
        "long_prompt": "400",
    }
    allowed = {"200", "408", "413", "429", "closed", "open at the end"}
    for attack, code in expected.items():
        if code not in rows[attack]:
            # a defence reached only past the 1-second attack on a busy host (CI saw slowloris's
            # connections all still open when it ended, none yet at the 0.6 s header deadline): that
            # attack alone, twice as long, must reach it
            again = run_abuse(replace(SHORT, attacks=[attack], attack_s=2 * SHORT.attack_s))
            assert again["problems"] == [], report_table(again)
            rows[attack] = set(again["rows"][0]["statuses"])
        assert code in rows[attack] and rows[attack] <= allowed | {code}, (attack, table)
    tenant_row = next(row for row in report["rows"] if row["attack"] == "tenant_names")
    assert tenant_row["metrics_bytes_after"] < 2 * tenant_row["metrics_bytes_before"], table
