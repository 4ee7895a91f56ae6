"""`benchmarks/aic_gemm_versions.py`: each collector version's layer time over the newest version's,
on planted tables (no aiconfigurator database needed)."""

import random
from pathlib import Path

import numpy as np
import pytest

from benchmarks.aic_gemm_versions import peak_share, version_ratios
from simulator.calibration.aic_tables import GemmTable

GEMMS = [("qkv", 256, 128), ("down", 128, 512)]
GRID_N, GRID_K = (128, 256, 512), (128, 256, 512)


def planted(version: str, scale: float, ms=(8, 64, 1024)) -> GemmTable:
    """Times a + b·m·n·k (a real GEMM's shape away from tile steps), times `scale`."""
    m = np.array(ms, dtype=float)
    by_nk = {(n, k): (m, scale * (2e-6 + 1e-13 * m * n * k)) for n in GRID_N for k in GRID_K}
    return GemmTable(Path(f"planted/{version}"), version, by_nk, "fp8")


def test_ratios_are_over_the_newest_version_by_number_not_by_string():
    slow = random.uniform(1.1, 2.0)
    # "0.9.0" sorts after "0.24.0" as a string; by number 0.24 is the newest.
    tables = {"0.9.0": planted("0.9.0", slow), "0.24.0": planted("0.24.0", 1.0)}
    ratios = version_ratios(tables, GEMMS, tokens=(8, 64, 1024))
    assert ratios["0.24.0"] == pytest.approx({8: 1.0, 64: 1.0, 1024: 1.0})
    assert ratios["0.9.0"] == pytest.approx({8: slow, 64: slow, 1024: slow})


def test_a_token_count_one_version_lacks_is_left_out_of_that_version_only():
    tables = {"0.19.0": planted("0.19.0", 1.3, ms=(8, 64)), "0.24.0": planted("0.24.0", 1.0)}
    ratios = version_ratios(tables, GEMMS, tokens=(8, 64, 1024))
    assert set(ratios["0.19.0"]) == {8, 64}
    assert set(ratios["0.24.0"]) == {8, 64, 1024}


def test_peak_share_is_the_layers_flop_rate_over_the_peak():
    table = planted("1.0", 1.0)
    m = 1024
    seconds = sum(2e-6 + 1e-13 * m * n * k for _, n, k in GEMMS)
    flops = sum(2.0 * m * n * k for _, n, k in GEMMS)
    assert peak_share(table, GEMMS, m, peak_flops=1e12) == pytest.approx(flops / seconds / 1e12)
