"""Published sets: the schema of `simulator/validation/published/*.json` and its loading, checked.

A published set (figures only, each run with its source file, commit and date) holds runs of a real
serving stack on a real GPU: bursts of requests with their prompt and output lengths (or a
fixed-length batch: `batch_size` requests of the same lengths), sent at once (or at the run's
`arrival_s`), or a closed loop (`num_requests` of fixed lengths, at most `max_concurrency` in
flight, each sent when one ends: benchmark_serving's `--max-concurrency`), and the measured
makespan, mean TTFT, mean E2E latency and/or mean TPOT. A run may be `prefix_cached` (measured with
its prompts already in the server's prefix cache); a set may declare `burst_start_turns` (its load
generator opens the measured closed loop with every client at once) and `bunched_turns` (how many of
those turns stay bunched), `held_out_only` (an independent check, never fitted on), `fits` (what
its fit runs fit: the profile, the default, and / or its own `bunched_turns`), `kernel_era_like`
(the stored set whose stack generation it shares), `bunched_turns_like` (the stored set whose
load generator it shares: its `bunched_turns` read from that set at load, never a stale copy) and
`random_lengths` (a closed loop's per-request lengths as benchmark_serving's random dataset draws
them from its seed: `random_lengths`, below, instead of every request at the run's nominal lengths)
and `fit_metrics` (the measured means whose rows score its fit; its other rows are only reported).
Every set says whether its requests went through the stack's API server (`api_server`: an HTTP
benchmark against `vllm serve`, `trtllm-serve`, `sglang.launch_server`) or were fed to the engine
offline (`LLM.generate`, `trtllm-bench`, a C++ benchmark): only the former pay the profile's
per-request term (`EngineProfile.offline`).
Runs are split into `fit` and `held_out`. Apart from the replay (`published_replay`) and the report
(`published_report`) so that the format and its checks live in one place, read by both and by the
profile fit without running a simulation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from simulator.validation.fit_coordinates import DEFAULT_TERMS, FIT_TERMS

PUBLISHED_DIR = Path(__file__).parent / "published"
# what a run may have measured (its `measured` means), in the report's order
METRICS = ("makespan_s", "ttft_mean_s", "e2e_mean_s", "tpot_mean_s")
# what a set's fit runs may fit (`fits`, default the profile alone): the engine profile's terms
# (`profile_fit`), and, for a set measured by a closed-loop load generator, how many of its turns
# stay bunched (`closed_loop_fit`)
FIT_TARGETS = ("profile", "bunched_turns")


def random_lengths(
    input_len: int, output_len: int, count: int, seed: int, range_ratio: float
) -> tuple[list[int], list[int]]:
    """(prompt, output) lengths of `count` requests as vLLM's `benchmark_serving.py --dataset-name
    random` (and its copies, e.g. InferenceMAX's) draws them: numpy's global generator seeded with
    `--seed` (default 0), then each length uniform in [int(length x range_ratio), length], prompts
    first (`sample_random_requests`; its empty prefix draws nothing). Lengths are token counts before
    the client's decode / re-encode round trip, which may shorten a prompt by a few tokens."""
    if not (isinstance(seed, int) and seed >= 0 and 0 < range_ratio <= 1):
        raise ValueError(
            f"random_lengths: seed {seed!r}, range_ratio {range_ratio!r}; expected an integer "
            "seed >= 0 and a ratio in (0, 1] (benchmark_serving's --seed, --random-range-ratio)"
        )
    draw = np.random.RandomState(seed)  # the legacy generator `np.random.seed` seeds
    prompts = draw.randint(int(input_len * range_ratio), input_len + 1, size=count)
    outputs = draw.randint(int(output_len * range_ratio), output_len + 1, size=count)
    return [int(n) for n in prompts], [int(n) for n in outputs]


def fits(data: dict) -> list[str]:
    """What a set's fit runs fit (`FIT_TARGETS`): its `fits`, else the profile alone."""
    return list(data.get("fits", ["profile"]))


def fit_metrics(data: dict) -> tuple[str, ...]:
    """The measured means whose rows score a set's fit (`fit_metrics`, every one of `METRICS` where it
    names none); its other rows are replayed and reported, fit and held-out alike, but fit nothing."""
    return tuple(data.get("fit_metrics", METRICS))


def published_names() -> list[str]:
    return sorted(path.stem for path in PUBLISHED_DIR.glob("*.json"))


def _carried_bunched_turns(path: Path, data: dict, source: str) -> float:
    """The `bunched_turns` of stored set `source`, which `data` (read from `path`) names as sharing
    its load generator (`bunched_turns_like`): fitted there, carried here as it stands."""
    if source not in published_names():
        raise ValueError(
            f"{path}: bunched_turns_like is {source!r}; expected the name of a stored set whose "
            f"load generator this one shares, one of {published_names()}"
        )
    carried = json.loads((PUBLISHED_DIR / f"{source}.json").read_text())
    if "bunched_turns" not in carried or "bunched_turns_like" in carried:
        raise ValueError(
            f"{path}: bunched_turns_like names {source!r}, which has no bunched_turns of its own; "
            "expected a set whose fit runs fit them (its fits name 'bunched_turns')"
        )
    # a loaded set written back holds the carried figure: the same one is no second source
    own = data.get("bunched_turns", carried["bunched_turns"])
    if own != carried["bunched_turns"] or "bunched_turns" in data.get("fits", ()):
        raise ValueError(
            f"{path}: bunched_turns_like names {source!r} (B = {carried['bunched_turns']}) beside "
            f"its own bunched_turns ({own!r}, or a fit of them); expected one of the two: carried "
            "from that set, or the set's own"
        )
    return carried["bunched_turns"]


def load_published(name_or_path: str | Path) -> dict:
    path = Path(name_or_path)
    if not (path.suffix == ".json" and path.exists()):
        path = PUBLISHED_DIR / f"{name_or_path}.json"
    if not path.exists():
        raise ValueError(
            f"published set {str(name_or_path)!r} is unknown; expected one of {published_names()} "
            "or a path to a JSON file"
        )
    data = json.loads(path.read_text())
    like = data.get("kernel_era_like")
    if like is not None and like not in published_names():
        raise ValueError(
            f"{path}: kernel_era_like is {like!r}; expected the name of a stored set whose era "
            f"this source shares, one of {published_names()}"
        )
    if not isinstance(data.get("api_server"), bool):
        raise ValueError(
            f"{path}: api_server is {data.get('api_server')!r}; expected true (its requests went "
            "through the stack's API server, over HTTP) or false (fed to the engine offline)"
        )
    turns = data.get("burst_start_turns")
    if turns is not None and not (isinstance(turns, int) and turns >= 1):
        raise ValueError(
            f"{path}: burst_start_turns is {turns!r}; expected an integer >= 1 (the load "
            "generator's requests per client, its first turn sent at once)"
        )
    drawn = data.get("random_lengths")
    if drawn is not None and not (
        isinstance(drawn, dict) and set(drawn) == {"seed", "range_ratio"}
    ):
        raise ValueError(
            f"{path}: random_lengths is {drawn!r}; expected {{'seed': int, 'range_ratio': float}} "
            "(the load generator's --seed and --random-range-ratio)"
        )
    if drawn is not None:
        try:  # the draw's own bounds, checked once here so the message names the file
            random_lengths(1, 1, 0, **drawn)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
    source = data.get("bunched_turns_like")
    if source is not None:
        data["bunched_turns"] = _carried_bunched_turns(path, data, source)
    bunched = data.get("bunched_turns")
    if bunched is not None and not (
        turns is not None
        and isinstance(bunched, (int, float))
        and not isinstance(bunched, bool)
        and 1 <= bunched <= turns
    ):
        raise ValueError(
            f"{path}: bunched_turns is {bunched!r}; expected a number from 1 to the set's "
            f"burst_start_turns ({turns!r}): the turns of its closed loop that stay bunched"
        )
    targets = data.get("fits", ["profile"])
    if not (
        isinstance(targets, list)
        and targets
        and all(isinstance(target, str) for target in targets)
        and len(set(targets)) == len(targets)
        and set(targets) <= set(FIT_TARGETS)
    ):
        raise ValueError(
            f"{path}: fits is {targets!r}; expected a non-empty list of distinct names from "
            f"{list(FIT_TARGETS)} (what its fit runs fit)"
        )
    terms = data.get("fit_terms", list(DEFAULT_TERMS))
    if not (
        isinstance(terms, list)
        and all(isinstance(term, str) for term in terms)
        and set(terms) <= set(FIT_TERMS)
    ):
        raise ValueError(
            f"{path}: fit_terms is {terms!r}; expected a list of names from {list(FIT_TERMS)} "
            "(the profile's figures its fit runs fit)"
        )
    metrics = data.get("fit_metrics", list(METRICS))
    if not (
        isinstance(metrics, list)
        and metrics
        and all(isinstance(metric, str) for metric in metrics)
        and set(metrics) <= set(METRICS)
    ):
        raise ValueError(
            f"{path}: fit_metrics is {metrics!r}; expected a non-empty list of names from "
            f"{list(METRICS)} (the measured means whose rows score its fit)"
        )
    if "bunched_turns" in targets and (turns is None or data.get("held_out_only")):
        raise ValueError(
            f"{path}: fits names bunched_turns, which needs burst_start_turns and fit runs (not "
            "held_out_only): its fit runs fit the turns its closed loop stays bunched"
        )
    for index, run in enumerate(data.get("runs", [])):
        # a fixed-length batch (B requests of the same lengths), or a closed loop's requests
        count = run.get("batch_size", run.get("num_requests"))
        if count is not None and drawn is not None and isinstance(run["prompt_tokens"], int):
            # each request its own lengths, as the load generator drew them from its seed; the
            # lengths it was asked for (the run's ISL / OSL) kept as `nominal_lengths`
            run["nominal_lengths"] = [run["prompt_tokens"], run["output_tokens"]]
            run["prompt_tokens"], run["output_tokens"] = random_lengths(
                run["prompt_tokens"], run["output_tokens"], int(count), **drawn
            )
        elif count is not None:
            for key in ("prompt_tokens", "output_tokens"):
                if isinstance(run[key], int):
                    run[key] = [run[key]] * int(count)
        limit = run.get("max_concurrency")
        if limit is not None and not (
            isinstance(limit, int) and 1 <= limit <= len(run["prompt_tokens"])
        ):
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) has max_concurrency {limit!r}; expected "
                f"an integer from 1 to its {len(run['prompt_tokens'])} requests"
            )
        if len(run["prompt_tokens"]) != len(run["output_tokens"]) or not run["prompt_tokens"]:
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) has {len(run['prompt_tokens'])} prompt "
                f"and {len(run['output_tokens'])} output lengths; expected equal, non-zero counts"
            )
        if "ttft_s" in run and len(run["ttft_s"]) != len(run["prompt_tokens"]):
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) has {len(run['ttft_s'])} ttft_s for "
                f"{len(run['prompt_tokens'])} requests; expected one recorded TTFT per request"
            )
        if any(not 0 <= i < len(run["prompt_tokens"]) for i in run.get("ttft_unrecorded", ())):
            raise ValueError(
                f"{path}: runs[{index}].ttft_unrecorded has an index outside the run's "
                f"{len(run['prompt_tokens'])} requests; expected request indices"
            )
        arrivals = np.asarray(run.get("arrival_s", [0.0] * len(run["prompt_tokens"])))
        if (
            len(arrivals) != len(run["prompt_tokens"])
            or np.any(np.diff(arrivals) < 0)
            or arrivals[0] < 0
        ):
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) has arrival_s that are not one non-negative, "
                "non-decreasing time per request; expected seconds from the run's start"
            )
        settings = data.get("engine_settings", {}) | run.get("engine_settings", {})
        if run.get("prefix_cached") and not settings.get("enable_prefix_caching"):
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) is prefix_cached but its engine settings do "
                "not enable prefix caching; expected enable_prefix_caching: true"
            )
        if run["split"] not in ("fit", "held_out"):
            raise ValueError(
                f"{path}: runs[{index}].split is {run['split']!r}; expected 'fit' or 'held_out'"
            )
        if data.get("held_out_only") and run["split"] != "held_out":
            raise ValueError(
                f"{path}: runs[{index}] ({run.get('id')}) is split {run['split']!r} in a held-out-only "
                "set; expected 'held_out' (an independent check is never fitted on)"
            )
    return data


__all__ = [
    "FIT_TARGETS",
    "PUBLISHED_DIR",
    "fits",
    "load_published",
    "published_names",
    "random_lengths",
]
