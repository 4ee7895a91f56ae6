#!/usr/bin/env bash
# Every GPU check of surgeplan in one call of a lent GPU, each stage bounded in time, results under $OUT.
#
# Why one script: a lease is short (15 minutes of device time a session, start-up included) and the
# machine keeps nothing, so the checks run back to back in one command, most important first, and a
# stage that runs long is stopped without losing the others. Stages (llama-3-8b preset, dummy bf16
# weights; nothing is downloaded):
#   1. kernels      benchmarks/kernels.py: the Triton paged decode / prefill kernels against SDPA
#                   (relative error per cell) and against a device copy measured in the same run.
#   2. engine_gpu   benchmarks/engine_gpu.py: the engine's forward against its rooflines, and
#                   LLMEngine.step() against the synthetic forward; engine_gpu_host.py: a decode
#                   forward's wall time against its kernels' GPU time, and the same step through the
#                   engine's CUDA graphs (engine/worker/cuda_graphs.py; their logits against eager).
#   3. profile      `surgeplan profile` on the GPU: our engine's measured step times, fitted into a
#                   calibration (the `surgeplan` stack on this GPU).
#   4. validate_*   `surgeplan validate` on the conversation and code traces: the live engine on the GPU
#                   against the simulator with stage 3's calibration as given (made before the runs,
#                   on other shapes: the honest test), at 50% and 80% load, two repeats each.
#
# On the device machine (see /work/.library/device/README.md): the Azure traces are carried in .gpu/ as
# AzureLLMInferenceTrace_{conv,code}.csv (their first 400 lines: `head -n 400` of ../shared/traces/),
# the packages its image lacks (pydantic and its parts, simpy) as wheels in .whl/:
#     carry: [".whl", ".gpu"]   command: bash benchmarks/gpu_lease.sh
# On a CPU, `SMOKE=1 bash benchmarks/gpu_lease.sh` runs every stage at toy sizes to check the script.
# Files back: stages.txt, all.log and one JSON per stage (eight at most come back from a lease: this
# writes eight).
# Measured on the H200 lease of 2026-12-04 (README, "Our engine on an H200"): kernels 27 s, engine_gpu
# ~20 s, profile 53 s, validate 96 requests ~100 s each (160 ran past 115 s on the conversation trace):
# about 5 minutes of the 10 a call may run, start-up not counted. Since 2026-12-06 the engine replays
# decode-only steps as CUDA graphs (captured at start: a few seconds more per engine built).
set -u
OUT=${OUT:-/tmp/gpu_lease}
SMOKE=${SMOKE:-0}
TRACES=${TRACES:-.gpu}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ] && [ "$SMOKE" = 0 ]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD
CLI=("$PY" -m surgeplan_cli)

# stage NAME SECONDS COMMAND...: runs it under a time limit, log appended to all.log, one line in stages.txt
stage() {
    local name=$1 limit=$2 start rc
    shift 2
    start=$(date +%s)
    echo "=== $name (limit ${limit}s) $(date -u +%FT%TZ)" >>"$OUT/all.log"
    timeout "$limit" "$@" >>"$OUT/all.log" 2>&1
    rc=$?
    echo "$name rc=$rc $(($(date +%s) - start))s" | tee -a "$OUT/stages.txt"
}

{
    date -u +%FT%TZ
    nvidia-smi 2>&1 | head -20
    nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv 2>&1
    "$PY" -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, "cuda", torch.cuda.is_available())'
    nproc
} >>"$OUT/all.log" 2>&1

if [ "$SMOKE" = 1 ]; then
    MODEL=tiny
    stage kernels 120 "$PY" benchmarks/kernels.py --smoke --json "$OUT/kernels.json"
    stage engine_gpu 120 "$PY" benchmarks/engine_gpu.py --smoke --json "$OUT/engine_gpu.json"
    stage engine_gpu_host 120 "$PY" benchmarks/engine_gpu_host.py --smoke --json "$OUT/engine_gpu_host.json"
    stage profile 300 "${CLI[@]}" profile --model "$MODEL" --quick --device cpu --out "$OUT/profile.json"
    VALIDATE=(--model "$MODEL" --num-requests 12 --load-levels 0.5 --repeats 2)
    SAVE_STEPS=1 # the workload fits' step logs too (a lease returns eight files at most: not there)
else
    MODEL=llama-3-8b
    stage kernels 60 "$PY" benchmarks/kernels.py --json "$OUT/kernels.json"
fi
# The engine runs the Triton kernels only if they agree with SDPA here; else its torch twins, said so.
if ! "$PY" -c 'import json, sys
rows = json.load(open(sys.argv[1]))["decode"] + json.load(open(sys.argv[1]))["prefill"]
sys.exit(0 if rows and max(r["rel_err_vs_sdpa"] for r in rows) < 2e-2 else 1)' "$OUT/kernels.json" 2>>"$OUT/all.log"; then
    export SURGEPLAN_KERNELS=reference
    echo "kernels disagree with SDPA or did not run: SURGEPLAN_KERNELS=reference" | tee -a "$OUT/stages.txt"
fi
if [ "$SMOKE" = 0 ]; then
    stage engine_gpu 90 "$PY" benchmarks/engine_gpu.py --json "$OUT/engine_gpu.json"
    stage engine_gpu_host 60 "$PY" benchmarks/engine_gpu_host.py --json "$OUT/engine_gpu_host.json"
    stage profile 120 "${CLI[@]}" profile --model "$MODEL" --device cuda --out "$OUT/profile.json"
    VALIDATE=(--model "$MODEL" --num-requests 96 --load-levels 0.5,0.8 --repeats 2)
fi
# Stage 3's calibration as given; without it (stage 3 failed), the workload fit alone.
if [ -s "$OUT/profile.json" ]; then
    VALIDATE+=(--calibration "$OUT/profile.json")
fi
for trace in AzureLLMInferenceTrace_conv AzureLLMInferenceTrace_code; do
    stage "validate_$trace" 130 "${CLI[@]}" validate --trace "$TRACES/$trace.csv" "${VALIDATE[@]}" \
        --profile none --own-profile none \
        --out "$OUT/validate_$trace.json" ${SAVE_STEPS:+--save-steps "$OUT/steps_$trace.json"}
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$OUT/all.log" 2>&1
cat "$OUT/stages.txt"
