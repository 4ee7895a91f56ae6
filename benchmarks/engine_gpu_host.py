"""Where a decode step's time goes on a GPU: the host launching kernels, or the kernels themselves.

The H200 lease of 2026-12-04 found every engine step at 27-70 ms whatever its shape, against
kernel sums of 5-23 ms (docs/measured/engine-on-gpu.md, "Our engine on an H200"), and inferred that eager PyTorch's launches
from Python set the time. This measures it, for decode steps of the synthetic forward
(`engine_gpu.decode_inputs`) at a few batch sizes:

- `wall_ms`: the eager forward, synchronised (do_bench median), as the engine runs it;
- `kernel_ms`, `kernels`: the GPU time of the kernels one forward launches and their count
  (torch.profiler over several forwards, device time summed per forward);
- `gpu_busy`: kernel time over wall time (near 1: the GPU sets the pace; near 0: the host does);
- `graph_ms`: the same step through the engine's decode graphs (`engine/worker/cuda_graphs.py`:
  the inputs copied into the graph's buffers, one replay), which launches no kernel from Python;
  `graph_rel_err`: its logits against the eager forward's, ‖graph − eager‖ / ‖eager‖.

    python benchmarks/engine_gpu_host.py [--json out.json]      # on a GPU
    python benchmarks/engine_gpu_host.py --smoke                # checks the script on a CPU
"""

import argparse
import statistics
import sys
from pathlib import Path

if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from benchmarks.bench_utils import (  # noqa: E402
    hardware_header,
    int_list,
    median_seconds,
    print_header,
    print_table,
    save_json,
)
from benchmarks.engine_gpu import build_engine, decode_inputs  # noqa: E402
from engine.worker.cuda_graphs import DecodeGraphs  # noqa: E402
from engine.worker.inputs import StepInputs  # noqa: E402

COLUMNS = [
    "batch", "context", "wall_ms", "kernel_ms", "kernels", "gpu_busy", "graph_ms", "graph",
    "graph_rel_err",
]  # fmt: skip
PROFILED_FORWARDS = 5


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model", default="llama-3-8b", help="preset name or local model directory"
    )
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--batches", type=int_list, default=[1, 32, 128])
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--json", help="also write the table here")
    parser.add_argument("--smoke", action="store_true", help="tiny preset on the CPU")
    args = parser.parse_args()
    # what engine_gpu.build_engine sizes the engine from
    args.contexts, args.prompts = [args.context], [args.context]
    args.api_batch, args.api_prompt, args.api_steps = 1, 1, 1
    if args.smoke:
        args.model, args.dtype, args.batches, args.context = "tiny", "float32", [1, 4], 40
        args.contexts, args.prompts = [40], [40]
    return args


def kernel_time_per_forward(forward, device: torch.device) -> tuple[float | None, float | None]:
    """(GPU seconds of the kernels one forward launches, kernels per forward); (None, None) on a CPU."""
    if device.type != "cuda":
        return None, None
    forward()
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED_FORWARDS):
            forward()
        torch.cuda.synchronize(device)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    total_us = sum(e.time_range.elapsed_us() for e in kernels)  # each kernel's own GPU time
    return total_us * 1e-6 / PROFILED_FORWARDS, len(kernels) / PROFILED_FORWARDS


def engine_graphs(engine) -> DecodeGraphs:
    """The engine's captured decode graphs; where none were (a CPU) their buffers, run eagerly."""
    runner = engine.model_runner
    if runner.decode_graphs is not None:
        return runner.decode_graphs
    return DecodeGraphs(
        runner.model,
        runner.kv_caches,
        max_num_seqs=engine.scheduler_config.max_num_seqs,
        max_model_len=engine.scheduler_config.max_model_len,
        device=engine.device,
        capture=False,
    )


def host_row(engine, graphs: DecodeGraphs, batch: int, context: int, generator) -> dict | None:
    """One table row: the eager forward, and the same step through the engine's decode graphs."""
    inputs = decode_inputs(engine, batch, context, generator)
    if inputs is None:
        return None
    runner = engine.model_runner

    def forward():
        return runner.model(*inputs[:2], runner.kv_caches, inputs[2])

    step = StepInputs(*inputs, producing_entries=list(range(batch)))
    eager_logits, graph_logits = forward(), graphs.run(step)
    rel_err = float((graph_logits - eager_logits).norm() / eager_logits.norm())
    wall_s = median_seconds(forward, engine.device, rep_ms=200)
    kernel_s, kernels = kernel_time_per_forward(forward, engine.device)
    graph_s = median_seconds(lambda: graphs.run(step), engine.device, rep_ms=200)
    graph = (
        f"replay of size {graphs.size_for(batch)}"
        if graphs.graphs
        else "buffers, eager (none captured)"
    )
    return dict(
        batch=batch,
        context=context,
        wall_ms=wall_s * 1e3,
        kernel_ms=None if kernel_s is None else kernel_s * 1e3,
        kernels=kernels,
        gpu_busy=None if kernel_s is None else kernel_s / wall_s,
        graph_ms=graph_s * 1e3,
        graph=graph,
        graph_rel_err=rel_err,
    )


def main() -> None:
    args = parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda" and not args.smoke:
        raise SystemExit("no CUDA device: this benchmark needs a GPU (--smoke checks it on a CPU)")
    header = hardware_header(device, f"Decode step: host vs GPU ({args.model}, dummy {args.dtype})")
    engine = build_engine(args, device)
    print_header(header)
    generator = torch.Generator().manual_seed(0)
    rows: list[dict] = []
    graphs = engine_graphs(engine)
    for batch in args.batches:
        row = host_row(engine, graphs, batch, args.context, generator)
        if row is not None:
            rows.append(row)
    print_table(
        rows, COLUMNS, "Decode forward: eager wall time, its kernels' GPU time, graph replay"
    )
    busy = [row["gpu_busy"] for row in rows if row["gpu_busy"] is not None]
    if busy:
        print(f"median GPU-busy share of an eager decode forward: {statistics.median(busy):.0%}")
    save_json(args.json, header, {"decode": rows})


if __name__ == "__main__":
    main()
