"""Continuous vs static batching vs Hugging Face `generate`, on this CPU with `cpu-small`.

Requests take their prompt and output lengths from the Azure conversation trace (../shared/traces,
scaled to fit the small model). Prints three tables: (a) offline throughput, (b) Poisson arrivals
near the static server's capacity: latency and TTFT, (c) KV memory utilisation (in both tables).

    .venv/bin/python benchmarks/engine_cpu.py [--requests 96] [--json out.json]
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[0] = str(REPO)  # not benchmarks/: its kernels.py and traces.py would shadow the packages

from benchmarks.machine import describe_machine  # noqa: E402
from engine import LLM  # noqa: E402
from engine.model.presets import preset_config  # noqa: E402
from engine.workload import WorkloadResult, format_table, requests_of, run_workload, scale_lengths  # noqa: E402
from traces import load_trace  # noqa: E402

TRACE = REPO.parent / "shared" / "traces" / "AzureLLMInferenceTrace_conv.csv"
MAX_MODEL_LEN = 512
KV_BLOCKS, BLOCK_SIZE = 256, 16  # 4,096 token slots: 8 static reservations of 512 tokens
MAX_NUM_SEQS = 32


def save_model_dir(directory: Path) -> Path:
    """cpu-small with Hugging Face's own random init, saved so both engines load identical weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = preset_config("cpu-small")
    config.pop("architectures"), config.pop("model_type")
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(**config)).save_pretrained(directory)
    return directory


def workload(num_requests: int, seed: int):
    trace = load_trace(TRACE)
    rng = np.random.default_rng(seed)
    pick = np.sort(rng.choice(len(trace), num_requests, replace=False))
    prompts, outputs, clipped = scale_lengths(
        trace.prompt_tokens[pick], trace.output_tokens[pick], 1 / 8, 1 / 4, MAX_MODEL_LEN
    )
    return prompts, outputs, clipped


def engine_run(model_dir, policy, prompts, params, label, offsets=None, **extra) -> WorkloadResult:
    llm = LLM(
        str(model_dir),
        dtype="float32",
        max_model_len=MAX_MODEL_LEN,
        num_kv_blocks=KV_BLOCKS,
        block_size=BLOCK_SIZE,
        max_num_seqs=MAX_NUM_SEQS,
        policy=policy,
        **extra,
    )
    return run_workload(
        llm.engine, prompts, params, label, arrival_offsets_s=offsets, progress=True
    )


def hf_static_batches(model_dir, prompts, outputs, batch_size: int) -> dict:
    """HF generate in static batches: left-padded prompts, each batch runs until its longest output."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    start, tokens = time.perf_counter(), 0
    for i in range(0, len(prompts), batch_size):
        batch, wanted = prompts[i : i + batch_size], outputs[i : i + batch_size]
        width = max(len(p) for p in batch)
        ids = torch.tensor([[0] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        with torch.no_grad():
            model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=int(max(wanted)),
                do_sample=False,
                pad_token_id=0,
            )
        tokens += int(sum(wanted))  # the useful tokens: each request's own output length
        print(
            f"  hf batch {i // batch_size + 1}/{-(-len(prompts) // batch_size)}",
            file=sys.stderr,
            end="\r",
        )
    duration = time.perf_counter() - start
    return {
        "label": f"HF generate, batches of {batch_size}",
        "duration_s": duration,
        "output_tokens": tokens,
        "output_tokens_per_s": tokens / duration,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--poisson-requests", type=int, default=64)
    parser.add_argument(
        "--loads",
        default="0.6,0.9,1.2",
        help="Poisson rates to try, as shares of the static server's offline req/s",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    prompt_lens, output_lens, clipped = workload(args.requests, args.seed)
    print(f"# engine on CPU — {describe_machine()}")
    print(
        f"{args.requests} requests from {TRACE.name} (lengths scaled 1/8 prompt, 1/4 output; {clipped} prompts clipped "
        f"to fit max_model_len {MAX_MODEL_LEN}): prompt mean {prompt_lens.mean():.0f}, output mean {output_lens.mean():.0f} "
        f"tokens. KV pool {KV_BLOCKS} blocks x {BLOCK_SIZE} tokens; max_num_seqs {MAX_NUM_SEQS}."
    )
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = save_model_dir(Path(tmp))
        prompts, params = requests_of(
            prompt_lens, output_lens, preset_config("cpu-small")["vocab_size"], args.seed
        )
        offline = [
            engine_run(model_dir, "continuous", prompts, params, "continuous (paged)"),
            engine_run(model_dir, "static", prompts, params, "static (reserve max_model_len)"),
            engine_run(
                model_dir,
                "static",
                prompts,
                params,
                "static (reserve prompt+max)",
                static_reserve="request",
            ),
        ]
        static_batch = KV_BLOCKS * BLOCK_SIZE // MAX_MODEL_LEN
        hf = hf_static_batches(model_dir, prompts, output_lens, static_batch)
        print("\n(a) offline throughput (all requests at t=0)")
        print(format_table(offline))
        print(
            f"{hf['label']:<28} {args.requests:>5} {hf['duration_s']:>7.1f} {hf['output_tokens_per_s']:>10.1f}"
        )
        cont = offline[0].output_tokens_per_s
        print(
            f"continuous / static: {cont / offline[1].output_tokens_per_s:.2f}x; continuous / HF generate: "
            f"{cont / hf['output_tokens_per_s']:.2f}x  (target ≥ 2x each)"
        )

        n = args.poisson_requests
        unit_offsets = np.cumsum(
            np.random.default_rng(args.seed + 1).exponential(1.0, n)
        )  # one arrival per second
        online = []
        for load in (float(x) for x in args.loads.split(",")):
            rate = load * offline[1].requests_per_s
            offsets = unit_offsets / rate
            pair = [
                engine_run(
                    model_dir,
                    "continuous",
                    prompts[:n],
                    params[:n],
                    f"continuous, {load:.0%} load",
                    offsets,
                ),
                engine_run(
                    model_dir,
                    "static",
                    prompts[:n],
                    params[:n],
                    f"static, {load:.0%} load",
                    offsets,
                ),
            ]
            online += pair
            print(
                f"\n(b) Poisson arrivals at {rate:.2f} req/s ({load:.0%} of static's offline capacity), {n} requests"
            )
            print(format_table(pair))
            print(
                f"mean latency continuous / static: {pair[0].mean_latency_s / pair[1].mean_latency_s:.2f}x "
                f"(target ≤ 0.5x); P99 {pair[0].p99_latency_s / pair[1].p99_latency_s:.2f}x; "
                f"mean TTFT {pair[0].mean_ttft_s / pair[1].mean_ttft_s:.2f}x"
            )
        online_cont = [r for r in online if r.label.startswith("continuous")]
        online_static = [r for r in online if r.label.startswith("static")]
        print(
            f"\n(c) KV memory utilisation (tokens stored / slots reserved, time-weighted): paged "
            f"{offline[0].kv_utilization:.1%} offline, {min(r.kv_utilization for r in online_cont):.1%} or more online; "
            f"static reservation {offline[1].kv_utilization:.1%} offline, "
            f"{max(r.kv_utilization for r in online_static):.1%} or less online (target paged ≥ 90%)"
        )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": describe_machine(),
                    "offline": [r.as_dict() for r in offline],
                    "hf_generate": hf,
                    "loads": args.loads,
                    "online": [r.as_dict() for r in online],
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
