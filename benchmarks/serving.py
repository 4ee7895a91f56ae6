"""Online serving overhead: the same requests offline (`LLM.generate`) and online (the OpenAI server in
its own process + the HTTP replay client, every request sent at t=0), on `cpu-small` with dummy weights.

Target: online output tokens/s ≥ 0.9x offline. Lengths follow the Azure conversation trace fit
(scaled to the small model, as `surgeplan demo` does); prompts are the replay client's own token ids.

The two modes alternate for --rounds rounds and the best run of each is compared: on a small shared
machine other processes slow single runs by up to several times, and the best run is the one least hit.

    .venv/bin/python benchmarks/serving.py [--requests 48] [--rounds 5] [--model cpu-small] [--json out.json]
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[0] = str(REPO)  # not benchmarks/: its traces.py would shadow the package

from benchmarks.machine import describe_machine  # noqa: E402
from engine import LLM, SamplingParams  # noqa: E402
from engine.model.presets import preset_config  # noqa: E402
from engine.openai.launcher import ServerProcess  # noqa: E402
from engine.workload import scale_lengths  # noqa: E402
from traces import Trace  # noqa: E402
from traces.lengths import fitted_length  # noqa: E402
from traces.replay import ReplayConfig  # noqa: E402
from traces.replay_cli import run_replay  # noqa: E402
from traces.replay_summary import format_summary, summarise  # noqa: E402
from traces.tokens import PromptTokenSynthesizer  # noqa: E402

SETTINGS = {"max_model_len": 512, "num_kv_blocks": 256, "block_size": 16, "max_num_seqs": 32}
MIN_TOKEN_ID, TARGET = 3, 0.9
OFFLINE, ONLINE = "offline LLM.generate", "online server + replay"
WARM_UP = 4  # requests run once before timing, in both modes (first-call allocations)


def request_set(num_requests: int, seed: int) -> Trace:
    rng = np.random.default_rng(seed)
    prompts, outputs, _ = scale_lengths(
        fitted_length("azure-conv-prompt").sample(rng, num_requests),
        fitted_length("azure-conv-output").sample(rng, num_requests),
        1 / 8,
        1 / 4,
        max_model_len=SETTINGS["max_model_len"],
    )
    return Trace(np.zeros(num_requests), prompts, outputs, name=f"azure-conv-fit-{num_requests}")


class Offline:
    """`LLM.generate` over the request set, the same token ids the replay client sends."""

    def __init__(self, model: str, trace: Trace, seed: int):
        self.llm = LLM(model, load_format="dummy", **SETTINGS)
        synthesizer = PromptTokenSynthesizer(
            self.llm.engine.model_config.vocab_size, seed, MIN_TOKEN_ID
        )
        self.prompts = [synthesizer.prompt_token_ids(trace, i).tolist() for i in range(len(trace))]
        self.params = [
            SamplingParams(temperature=0, max_tokens=int(n), ignore_eos=True)
            for n in trace.output_tokens
        ]
        self.llm.generate(
            self.prompts[:WARM_UP], self.params[:WARM_UP]
        )  # first-call allocations, as online

    def run(self) -> dict:
        start, cpu_start = time.perf_counter(), time.process_time()
        outputs = self.llm.generate(self.prompts, self.params, use_tqdm=True)
        duration = time.perf_counter() - start
        tokens = sum(len(o.output_token_ids) for o in outputs)
        return {
            "mode": OFFLINE,
            "requests": len(outputs),
            "output_tokens": tokens,
            "duration_s": duration,
            "output_tokens_per_s": tokens / duration,
            "failed": 0,
            "mean_ttft_s": float(np.mean([o.metrics.ttft for o in outputs])),
            "mean_e2e_s": float(np.mean([o.metrics.e2e_latency for o in outputs])),
            "client_cpu_s": time.process_time() - cpu_start,
        }


class Online:
    """The server in its own process; the replay client here sends every request at t=0."""

    def __init__(self, model: str, trace: Trace, seed: int):
        options = [f"--{k.replace('_', '-')}={v}" for k, v in SETTINGS.items()]
        self.server = ServerProcess(
            [
                "--model",
                model,
                "--load-format",
                "dummy",
                *options,
                "--uvicorn-log-level",
                "warning",
            ],
            env={"PYTHONPATH": str(REPO)},
        )
        self.server.wait_healthy(timeout_s=300)
        self.trace = trace
        self.config = ReplayConfig(
            url=self.server.url, time_scale=0, seed=seed, min_token_id=MIN_TOKEN_ID
        )
        run_replay(trace.select(slice(0, WARM_UP)), self.config, progress=False)  # as offline
        self.last_summary = ""

    def run(self) -> dict:
        cpu_start = time.process_time()
        summary = summarise(run_replay(self.trace, self.config))
        self.last_summary = format_summary(summary)
        return {
            "mode": ONLINE,
            "requests": summary.completed,
            "output_tokens": summary.total_output_tokens,
            "duration_s": summary.duration_s,
            "output_tokens_per_s": summary.output_throughput,
            "failed": summary.failed,
            "mean_ttft_s": summary.ttft.mean,
            "mean_e2e_s": summary.e2e.mean,
            "client_cpu_s": time.process_time() - cpu_start,
        }

    def close(self) -> None:
        self.server.stop()


def format_rows(rows: list[dict]) -> str:
    header = (
        f"{'round':>5} {'mode':<24} {'reqs':>5} {'out tokens':>10} {'time s':>7} {'out tok/s':>10} "
        f"{'mean TTFT s':>11} {'mean E2E s':>10} {'client CPU s':>12}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['round']:>5} {r['mode']:<24} {r['requests']:>5} {r['output_tokens']:>10} {r['duration_s']:>7.1f} "
            f"{r['output_tokens_per_s']:>10.1f} {r['mean_ttft_s']:>11.2f} {r['mean_e2e_s']:>10.2f} "
            f"{r['client_cpu_s']:>12.2f}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--model", default="cpu-small")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--rounds", type=int, default=5, help="offline/online pairs; the best of each counts"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    trace = request_set(args.requests, args.seed)
    print(f"# serving overhead — {describe_machine()}")
    print(
        f"{args.model} (dummy weights, vocab {preset_config(args.model)['vocab_size']}); {args.requests} requests, "
        f"prompt mean {trace.prompt_tokens.mean():.0f}, output mean {trace.output_tokens.mean():.0f} tokens "
        f"(Azure conv fit, scaled 1/8 and 1/4); KV {SETTINGS['num_kv_blocks']} blocks x {SETTINGS['block_size']}, "
        f"max_num_seqs {SETTINGS['max_num_seqs']}, max_model_len {SETTINGS['max_model_len']}; online: all sent at t=0"
    )
    offline, online = Offline(args.model, trace, args.seed), Online(args.model, trace, args.seed)
    rows = []
    try:
        for round_ in range(1, args.rounds + 1):  # interleaved, first one then the other, so other
            pair = (
                (offline, online) if round_ % 2 else (online, offline)
            )  # load on the machine hits both
            rows += [{"round": round_} | mode.run() for mode in pair]
    finally:
        online.close()
    print(online.last_summary)
    print(format_rows(rows))
    best = {
        mode: max(r["output_tokens_per_s"] for r in rows if r["mode"] == mode)
        for mode in (OFFLINE, ONLINE)
    }
    ratio = best[ONLINE] / best[OFFLINE]
    failed = sum(r["failed"] for r in rows)
    verdict = "meets" if ratio >= TARGET and not failed else "MISSES"
    per_round = [
        b["output_tokens_per_s"] / a["output_tokens_per_s"]
        if a["mode"] == OFFLINE
        else a["output_tokens_per_s"] / b["output_tokens_per_s"]
        for a, b in zip(rows[::2], rows[1::2])
    ]
    print(
        f"best of {args.rounds}: online {best[ONLINE]:.1f} / offline {best[OFFLINE]:.1f} output tokens/s = "
        f"{ratio:.2f}x ({verdict} the ≥ {TARGET}x target; {failed} failed requests); "
        f"per round: {', '.join(f'{r:.2f}x' for r in per_round)} (median {float(np.median(per_round)):.2f}x)"
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": describe_machine(),
                    "rows": rows,
                    "best": best,
                    "ratio": ratio,
                    "per_round_ratio": per_round,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
