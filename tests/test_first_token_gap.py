"""`benchmarks/first_token_gap.py`: the stored replay's mean TTFT joined to each run's lengths and
concurrency, at the fewest in flight, per stack, GPU and degree, held prompts left out."""

import random

from benchmarks.first_token_gap import METRIC, gap_rows
from simulator.validation.published_sets import load_published

SET = "aic-silicon-trtllm-70b-more-tp"  # TP1 / TP2 / TP8, the 1k / 1k runs below TP8 held


def test_the_gap_is_measured_minus_simulated_at_the_fewest_in_flight_without_held_runs():
    rng = random.Random()  # fresh figures each run
    runs = load_published(SET)["runs"]
    rows = [
        {
            "source": SET,
            "run": run["id"],
            "gpu": run["gpu"],
            "profile": "trtllm",
            "metric": metric,
            "tensor_parallel": run["tensor_parallel"],
            "measured": rng.uniform(0.05, 1.0),
            "simulated": rng.uniform(0.05, 1.0),
        }
        for run in runs
        for metric in (METRIC, "tpot_mean_s")
    ]
    table = gap_rows([{"rows": rows}], sets=(SET,))
    fewest = min(run["max_concurrency"] for run in runs)
    expected = {
        (row["gpu"], f"{lengths[0]} / {lengths[1]}", row["tensor_parallel"]): row
        for row, run in zip(rows[::2], runs)
        if run["max_concurrency"] == fewest
        and not run.get("engine_settings", {}).get("batch_wait_steps")
        for lengths in [run["nominal_lengths"]]
    }
    cells = {
        (line["GPU"], line["prompt / output"], int(column[2])): text
        for line in table
        for column, text in line.items()
        if column.startswith("TP")
    }
    assert set(cells) == set(expected)  # the held 1k / 1k runs below TP8 are not among them
    assert ("B200-180GB", "1024 / 1024", 1) not in cells and (
        "B200-180GB",
        "1024 / 1024",
        8,
    ) in cells
    for key, row in expected.items():
        measured_ms, simulated_ms = 1e3 * row["measured"], 1e3 * row["simulated"]
        assert cells[key] == (
            f"{measured_ms:.0f} / {simulated_ms:.0f} / {measured_ms - simulated_ms:+.0f}"
        )
