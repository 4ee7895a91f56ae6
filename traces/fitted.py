"""Length distributions fitted to the public Azure LLM inference traces (2023, Splitwise), shipped
as figures so synthetic traffic can look like production without the trace files.

Provenance: Azure/AzurePublicDataset `data/AzureLLMInferenceTrace_{code,conv}.csv` (CC-BY 4.0;
Patel et al., "Splitwise", ISCA 2024), read from `../shared/traces/` (sha256 below). Quantiles are
numpy's linear-interpolation quantiles of ContextTokens (prompt) and GeneratedTokens (output) at
`FIT_PROBABILITIES`; the lognormal is the maximum-likelihood fit of the same column. Plain data:
`traces.lengths` builds distributions from it (`fitted_length`, `fitted_lognormal`). Regenerate and
compare with `surgeplan traces fit FILE` (the tests recompute them from the files).
"""
from __future__ import annotations

# Probabilities at which the empirical quantiles are tabulated (dense in the tail, where P99 lives).
FIT_PROBABILITIES = (0.0, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55,
                     0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999, 1.0)

SOURCE = "Azure/AzurePublicDataset data/AzureLLMInferenceTrace_{}.csv (2023-11-16, CC-BY 4.0)"


def _table(trace: str, column: str, sha256: str, requests: int, quantiles: tuple[float, ...],
           lognormal: tuple[float, float]) -> dict:
    provenance = (f"{SOURCE.format(trace)}, sha256 {sha256}, {requests} requests, "
                  f"{'ContextTokens' if column == 'prompt' else 'GeneratedTokens'} quantiles")
    return {"quantiles": quantiles, "provenance": provenance, "lognormal_median_sigma": lognormal}


FITTED_LENGTHS: dict[str, dict] = {
    "azure-code-prompt": _table(
        "code", "prompt", "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6", 8819,
        (3.0, 17.0, 44.0, 75.0, 147.0, 232.0, 385.6, 578.0, 770.0, 938.6, 1075.0, 1261.1, 1469.0, 1690.0,
         1909.0, 2163.7, 2433.0, 2744.5, 3192.4, 3920.2, 5187.6, 7303.3, 7435.0, 7436.0, 7436.0, 7437.0,
         7437.0),
        lognormal=(1095.147, 1.3602)),
    "azure-code-output": _table(
        "code", "output", "54e9a6d2a4bd06ba1e060304b900abbc74cbea53de96506e60fe5bb4f2277fb6", 8819,
        (6.0, 6.0, 6.0, 6.0, 7.0, 7.0, 8.0, 9.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 16.0, 18.0, 20.0, 24.0,
         29.0, 39.0, 55.0, 90.0, 145.0, 251.46, 359.38, 825.274, 1899.0),
        lognormal=(16.251, 0.8472)),
    "azure-conv-prompt": _table(
        "conv", "prompt", "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8", 19366,
        (2.0, 29.0, 120.0, 181.0, 207.0, 372.0, 387.0, 396.0, 403.0, 414.0, 703.0, 984.0, 1020.0, 1045.0,
         1071.0, 1097.0, 1130.0, 1189.0, 1315.0, 1876.25, 2734.5, 4083.0, 4092.0, 4142.0, 4831.0, 6179.15,
         14050.0),
        lognormal=(759.996, 0.9852)),
    "azure-conv-output": _table(
        "conv", "output", "2f1e5b666d4e3055fdbba98598ce2ec307767b9064e03e2fa46676dbcc7d0bf8", 19366,
        (7.0, 16.0, 28.0, 41.0, 54.0, 67.0, 77.0, 85.0, 91.0, 96.0, 103.0, 113.0, 129.0, 151.0, 177.0, 217.0,
         384.0, 395.0, 400.0, 411.0, 424.0, 451.0, 522.0, 601.0, 643.175, 954.0, 1000.0),
        lognormal=(151.259, 0.859)),
}
