"""Length distributions fitted to public traces, shipped as figures so synthetic traffic can look like
production (or like a paper's workload) without the trace files.

Azure: Azure/AzurePublicDataset `data/AzureLLMInferenceTrace_{code,conv}.csv` (CC-BY 4.0; Patel et al.,
"Splitwise", ISCA 2024), read from `../shared/traces/` (sha256 below). Quantiles are numpy's
linear-interpolation quantiles of ContextTokens (prompt) and GeneratedTokens (output) at
`FIT_PROBABILITIES`; the lognormal is the maximum-likelihood fit of the same column. Regenerate and
compare with `surgeplan traces fit FILE` (the tests recompute them from the files).

ShareGPT (`sharegpt-2k-*`, DistServe's chatbot workload): the same fits (`traces.lengths.fit_empirical`,
`fit_lognormal`) of the per-request token counts in microsoft/sarathi-serve
`data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv` (Apache-2.0; commit below;
ShareGPT conversations, Llama-2 tokenizer, at most 8k tokens a request), keeping the requests with
num_prefill_tokens + num_decode_tokens < 2048, DistServe's own filter for OPT's 2048 positions
(LLMServe/DistServe evaluation/2-benchmark-serving/0-prepare-dataset.py). Not in ../shared and not
copied here: regenerate with `git show COMMIT:PATH` from that repository and the two fits. Prompt and
output are sampled independently (their correlation in the kept rows: -0.16).

Plain data: `traces.lengths` builds distributions from it (`fitted_length`, `fitted_lognormal`).
"""

from __future__ import annotations

# Probabilities at which the empirical quantiles are tabulated (dense in the tail, where P99 lives).
FIT_PROBABILITIES = (
    0.0,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.55,
    0.6,
    0.65,
    0.7,
    0.75,
    0.8,
    0.85,
    0.9,
    0.95,
    0.975,
    0.99,
    0.995,
    0.999,
    1.0,
)

SOURCE = "Azure/AzurePublicDataset data/AzureLLMInferenceTrace_{}.csv (2023-11-16, CC-BY 4.0)"


SHAREGPT_SOURCE = (
    "microsoft/sarathi-serve data/processed_traces/sharegpt_8k_filtered_stats_llama2_tokenizer.csv "
    "(commit 72339db5b120614033b317880ad3a05a5e4c9415, Apache-2.0), sha256 "
    "6d6c296302a853e2669a674a96f269283e60c57e60363bd450588a1066919f9f, 14561 of 30731 requests "
    "(prompt + output < 2048 tokens, DistServe's filter)"
)


def _entry(provenance: str, quantiles: tuple[float, ...], lognormal: tuple[float, float]) -> dict:
    return {"quantiles": quantiles, "provenance": provenance, "lognormal_median_sigma": lognormal}


def _table(
    trace: str,
    column: str,
    sha256: str,
    requests: int,
    quantiles: tuple[float, ...],
    lognormal: tuple[float, float],
) -> dict:
    provenance = (
        f"{SOURCE.format(trace)}, sha256 {sha256}, {requests} requests, "
        f"{'ContextTokens' if column == 'prompt' else 'GeneratedTokens'} quantiles"
    )
    return _entry(provenance, quantiles, lognormal)


FITTED_LENGTHS: dict[str, dict] = {
    "azure-code-prompt": _table(
        "code",
        "prompt",
        "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6",
        8819,
        (
            3.0,
            17.0,
            44.0,
            75.0,
            147.0,
            232.0,
            385.6,
            578.0,
            770.0,
            938.6,
            1075.0,
            1261.1,
            1469.0,
            1690.0,
            1909.0,
            2163.7,
            2433.0,
            2744.5,
            3192.4,
            3920.2,
            5187.6,
            7303.3,
            7435.0,
            7436.0,
            7436.0,
            7437.0,
            7437.0,
        ),
        lognormal=(1095.147, 1.3602),
    ),
    "azure-code-output": _table(
        "code",
        "output",
        "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6",
        8819,
        (
            6.0,
            6.0,
            6.0,
            6.0,
            7.0,
            7.0,
            8.0,
            9.0,
            9.0,
            10.0,
            11.0,
            12.0,
            13.0,
            14.0,
            16.0,
            18.0,
            20.0,
            24.0,
            29.0,
            39.0,
            55.0,
            90.0,
            145.0,
            251.46,
            359.38,
            825.274,
            1899.0,
        ),
        lognormal=(16.251, 0.8472),
    ),
    "azure-conv-prompt": _table(
        "conv",
        "prompt",
        "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8",
        19366,
        (
            2.0,
            29.0,
            120.0,
            181.0,
            207.0,
            372.0,
            387.0,
            396.0,
            403.0,
            414.0,
            703.0,
            984.0,
            1020.0,
            1045.0,
            1071.0,
            1097.0,
            1130.0,
            1189.0,
            1315.0,
            1876.25,
            2734.5,
            4083.0,
            4092.0,
            4142.0,
            4831.0,
            6179.15,
            14050.0,
        ),
        lognormal=(759.996, 0.9852),
    ),
    "azure-conv-output": _table(
        "conv",
        "output",
        "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8",
        19366,
        (
            7.0,
            16.0,
            28.0,
            41.0,
            54.0,
            67.0,
            77.0,
            85.0,
            91.0,
            96.0,
            103.0,
            113.0,
            129.0,
            151.0,
            177.0,
            217.0,
            384.0,
            395.0,
            400.0,
            411.0,
            424.0,
            451.0,
            522.0,
            601.0,
            643.175,
            954.0,
            1000.0,
        ),
        lognormal=(151.259, 0.859),
    ),
    "sharegpt-2k-prompt": _entry(
        f"{SHAREGPT_SOURCE}, num_prefill_tokens quantiles",
        (
            1.0,
            9.0,
            13.0,
            18.0,
            28.0,
            43.0,
            66.0,
            102.0,
            159.0,
            235.0,
            340.0,
            437.0,
            528.0,
            623.0,
            713.0,
            811.0,
            898.0,
            994.0,
            1099.0,
            1222.0,
            1360.0,
            1537.0,
            1661.0,
            1787.2,
            1857.2,
            1970.0,
            2043.0,
        ),
        lognormal=(303.695, 1.4766),
    ),
    "sharegpt-2k-output": _entry(
        f"{SHAREGPT_SOURCE}, num_decode_tokens quantiles",
        (
            2.0,
            4.0,
            18.0,
            33.0,
            62.0,
            92.0,
            129.0,
            175.0,
            218.0,
            264.0,
            305.0,
            340.0,
            375.0,
            411.0,
            445.0,
            487.0,
            531.0,
            577.0,
            625.0,
            687.0,
            778.0,
            880.0,
            944.0,
            985.0,
            1006.2,
            1019.88,
            1024.0,
        ),
        lognormal=(273.63, 1.0771),
    ),
}
