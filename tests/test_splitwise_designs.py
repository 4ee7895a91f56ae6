"""Splitwise's iso-cost designs (`benchmarks/splitwise_anchor.py`) under both price settings: the
catalog's list prices and Splitwise's own cost model (its artifact's 4.76 per DGX-H100, 2.21 per
DGX-A100), each design at most the baseline's cost and no further machine fitting beside it."""

import pytest

from benchmarks import splitwise_anchor as splitwise

H100, A100 = splitwise.H100, splitwise.A100


def _by_name(prices: str) -> dict:
    return {design.name: design for design in splitwise.designs(4, prices)}


def test_splitwise_cost_model_is_read_from_the_published_figures():
    assert splitwise.splitwise_machine_costs() == {H100: 4.76, A100: 2.21}
    assert splitwise.machine_cost_per_hour(H100, "splitwise") == 4.76
    with pytest.raises(ValueError, match="expected one of catalog, splitwise"):
        splitwise.machine_cost_per_hour(H100, "list")


@pytest.mark.parametrize("prices", splitwise.PRICES)
def test_every_design_fits_the_budget_and_leaves_no_machine_out(prices):
    designs = splitwise.designs(4, prices)
    h100, a100 = (splitwise.machine_cost_per_hour(gpu, prices) for gpu in (H100, A100))
    budget = 4 * h100
    assert designs[0].cost_per_hour == pytest.approx(budget)
    for design in designs:
        assert design.prices == prices
        assert design.cost_per_hour <= budget * (1 + 1e-9), design.name
        if design.name.startswith(
            "Splitwise-HA"
        ):  # no A100 fits beside, in the budget or 80% of it
            cheaper = splitwise.CHEAPER * budget
            full = design.cost_per_hour + a100 > budget
            assert full or cheaper - a100 < design.cost_per_hour <= cheaper, design.name


def test_splitwise_prices_choose_other_fleets_than_the_catalog():
    catalog, own = _by_name("catalog"), _by_name("splitwise")
    # the catalog: an H100 machine 1.67x an A100 one; Splitwise: 2.15x, so more A100s fit
    assert {"Splitwise-HA 1P5D", "Splitwise-HA 2P3D", "Splitwise-HA 3P1D"} <= set(catalog)
    assert {"Splitwise-HA 1P6D", "Splitwise-HA 2P4D", "Splitwise-HA 3P2D"} <= set(own)
    # at 20% lower cost: 2 + 2 under the catalog's prices; 1P4D and 2P2D under Splitwise's
    baseline = catalog["Baseline-H100 (4 machines, mixed batching)"].cost_per_hour
    assert catalog["Splitwise-HA 2P2D"].cost_per_hour / baseline == pytest.approx(0.8, abs=0.01)
    assert {"Splitwise-HA 1P4D", "Splitwise-HA 2P2D"} <= set(own)
    assert "Baseline-A100 (8 machines, mixed batching)" in own
    assert "Baseline-A100 (6 machines, mixed batching)" in catalog
