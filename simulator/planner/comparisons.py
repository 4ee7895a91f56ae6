"""What the recommendation is compared with, each a search run alongside the others:

- minimality: the same fleet with one replica less, simulated in full (it must miss);
- ± calibration error: the fewest replicas when every step takes (1 ± error) times as long;
- static baseline: the traditional server (static batching, KV reserved for `max_model_len` per
  request) on the same GPU — "with a traditional server you would need M";
- autoscaled fleet: the smallest warm pool (min_replicas) with which the scenario's autoscaler, cold
  starts included, still holds the SLO through the spike's ramp, and the money it saves;
- dynamic batch sizing: the fleet with the SLO-aware batch controller against the best fixed setting;
- KV cache dtypes: the fewest replicas with the answer's batch settings and the KV cache in another dtype
  (auto vs fp8 vs int8: "does FP8 KV help?").
"""

from __future__ import annotations

from dataclasses import replace

from simulator.fleet_spec import AutoscalerSpec
from simulator.planner.fleet import Answer, Batch, Fleet
from simulator.planner.search import Ahead, bisect, fewest_replicas


def one_fewer(fleet: Fleet, answer: Answer):
    """The full-fleet outcome one replica below the answer (None at the bottom of the range)."""
    if answer.replicas is None or answer.replicas <= fleet.low:
        return None
    if answer.below is not None and answer.below_is_full:
        return answer.below
    return (yield [fleet.probe(answer.replicas - 1, answer.batch, False, "one fewer")])[0]


def shifted(fleet: Fleet, answer: Answer, factor: float, phase: str):
    """Fewest replicas with step times x `factor`, full fleets. Slower steps never need fewer replicas, and
    faster ones never more, so the search starts at the answer (slower) or one below it (faster) and steps
    away from it only while the first probe says so: usually one full run and one that ends early."""
    shifted_fleet = replace(fleet, step_scale=factor)
    probe = lambda n: shifted_fleet.probe(n, answer.batch, False, phase)  # noqa: E731
    n = answer.replicas
    if factor >= 1.0:
        while not (yield [probe(n)])[0].meets:
            if n >= fleet.high:
                return None
            n += 1
        return n
    while n > fleet.low and (yield [probe(n - 1)])[0].meets:
        n -= 1
    return n


def static_baseline(fleet: Fleet, answer: Answer, fast_pass: bool):
    """The traditional server's fewest replicas, up to 4x the planner's range."""
    static = replace(fleet, label="static ", high=max(fleet.high * 4, fleet.high))
    batch = Batch(answer.batch.max_num_seqs, answer.batch.max_num_batched_tokens, policy="static")
    return (yield from fewest_replicas(static, [batch], fast_pass=fast_pass, check_below=False))


def autoscaler_spec(fleet: Fleet) -> AutoscalerSpec:
    """The scenario's autoscaler (its thresholds, cooldowns, cold start), or the default one."""
    spec = fleet.base.cluster.autoscaler
    return (
        spec.model_copy(update={"enabled": True}) if spec.enabled else AutoscalerSpec(enabled=True)
    )


def warm_pool(fleet: Fleet, answer: Answer):
    """(smallest min_replicas that holds the SLO, its outcome), the autoscaler free to grow to the top of
    the range; (None, outcome at the fixed answer's size) when even that warm pool misses."""
    spec = autoscaler_spec(fleet)
    top = max(fleet.high, answer.replicas)

    def probe(pool: int):
        scaler = spec.model_copy(update={"min_replicas": pool, "max_replicas": max(top, pool)})
        return fleet.probe(pool, answer.batch, False, "autoscaled", autoscaler=scaler)

    # the fixed fleet's answer less one first: a warm pool rarely does with much less (a miss ends early),
    # so the pool of the fixed answer's size is asked for next: it runs beside it on a free worker
    if answer.replicas > 1:
        yield Ahead([probe(answer.replicas)])
    found, seen = yield from bisect(probe, 1, answer.replicas, guess=answer.replicas - 1)
    return found, seen[found] if found is not None else seen[answer.replicas]


def dynamic_batch(
    fleet: Fleet, answer: Answer, grid: list[Batch], target_tpot_s: float, fast_pass: bool
):
    """Fewest replicas with the SLO-aware controller, its caps the largest of the grid."""
    batch = Batch(
        max(b.max_num_seqs for b in grid),
        max(b.max_num_batched_tokens for b in grid),
        batch_controller="slo",
        batch_target_tpot_s=target_tpot_s,
    )
    dynamic = replace(fleet, label="dynamic ")
    return (
        yield from fewest_replicas(
            dynamic, [batch], fast_pass=fast_pass, check_below=True, guess=answer.replicas
        )
    )


def kv_cache(fleet: Fleet, answer: Answer, kv_cache_dtype: str, fast_pass: bool):
    """Fewest replicas with the answer's batch settings and the KV cache stored in `kv_cache_dtype`."""
    batch = replace(answer.batch, kv_cache_dtype=kv_cache_dtype)
    return (
        yield from fewest_replicas(
            replace(fleet, label=f"kv {kv_cache_dtype} "),
            [batch],
            fast_pass=fast_pass,
            check_below=True,
            guess=answer.replicas,
        )
    )
