"""What one capacity search varies and answers: the batch settings a fleet runs with (`Batch`), one
GPU type's fleet and the jobs that probe it (`Fleet`: one replica's share, a sample, or the whole
fleet in parts), the scenario of a fleet (`fleet_scenario`) and the answer (`Answer`). Apart from
`simulator.planner.search` (the bisection and its confirmations) because the comparisons, the claims,
the recommendation and the benchmarks build fleets and read answers without searching.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from simulator.fleet_spec import AutoscalerSpec
from simulator.planner.bracket import Pair
from simulator.planner.ceiling import replica_floor
from simulator.planner.evaluate import make_job
from simulator.planner.outcome import Outcome
from simulator.planner.parts import parts_refusal
from simulator.scenario import Scenario


@dataclass(frozen=True)
class Batch:
    """The scheduler settings a fleet runs with."""

    max_num_seqs: int
    max_num_batched_tokens: int
    policy: str = "continuous"
    batch_controller: str = "fixed"
    batch_target_tpot_s: float | None = None
    kv_cache_dtype: str = "auto"

    def scheduler_updates(self) -> dict:
        updates = {
            "max_num_seqs": self.max_num_seqs,
            "max_num_batched_tokens": self.max_num_batched_tokens,
            "policy": self.policy,
            "batch_controller": self.batch_controller,
            "kv_cache_dtype": self.kv_cache_dtype,
        }
        if self.batch_target_tpot_s is not None:
            updates["batch_target_tpot_s"] = self.batch_target_tpot_s
        return updates


@dataclass
class Fleet:
    """One GPU type's search: what to vary, and the shared job options."""

    base: Scenario
    gpu: str
    tensor_parallel: int
    low: int
    high: int
    goodput_share: float | None = None
    early_stop: bool = True
    step_scale: float = 1.0
    label: str = ""  # ledger phase prefix ("", "static ", "dynamic ")
    sample_replicas: int | None = (
        256  # larger fixed fleets are confirmed on this many (None: whole)
    )
    # a sampled confirmation starts where a sample of this many meets (`_confirm_sampled`; None: at the
    # share pass's answer)
    estimate_replicas: int | None = 32
    # a sampled answer is confirmed on its whole fleet in parts (`_confirm_whole`) where they qualify
    whole_fleet: bool = True
    # per (batch, step scale): the fewest replicas the cost model's throughput ceiling allows
    floors: dict = field(default_factory=dict, repr=False)

    def floor(self, batch: Batch) -> int:
        """No fleet below this can meet (`simulator.planner.ceiling`), within [low, high]."""
        key = (batch, self.step_scale)
        if key not in self.floors:
            try:
                self.floors[key] = replica_floor(
                    self.scenario(1, batch), _traffic(self.base), self.step_scale
                )
            except ValueError:  # a scenario that cannot run: its probes say why
                self.floors[key] = self.low
        return max(self.low, min(self.floors[key], self.high))

    def guess(self, batch: Batch) -> int:
        """Where the bisection looks first: a quarter above the floor."""
        return min(self.high, math.ceil(self.floor(batch) * 1.25))

    def scenario(
        self, replicas: int, batch: Batch, autoscaler: AutoscalerSpec | None = None
    ) -> Scenario:
        return fleet_scenario(
            self.base, self.gpu, self.tensor_parallel, replicas, batch, autoscaler
        )

    def probe(
        self,
        replicas: int,
        batch: Batch,
        share: bool,
        phase: str,
        autoscaler: AutoscalerSpec | None = None,
        sample: int | None = None,
    ) -> Pair:
        """The job for `replicas` and its ledger context: one replica's share if `share`, else the whole
        fleet, or a sample of `sample` (default `sample_replicas`) replicas when the fleet is larger."""
        scenario = self.scenario(replicas, batch, autoscaler)
        sample = sample or self.sample_replicas
        sampled = not share and autoscaler is None and sample is not None and replicas > sample
        job = make_job(
            scenario,
            share=replicas if share or sampled else None,
            step_scale=self.step_scale,
            goodput_share=self.goodput_share,
            early_stop=self.early_stop,
            share_replicas=sample if sampled else 1,
        )
        return job, self._context(replicas, batch, phase, autoscaler)

    def _context(
        self, replicas: int, batch: Batch, phase: str, autoscaler: AutoscalerSpec | None = None
    ) -> dict:
        """A job's ledger context: the phase, GPU, fleet and settings."""
        return {
            "phase": self.label + phase,
            "gpu": self.gpu,
            "tensor_parallel": self.tensor_parallel,
            "replicas": replicas,
            "max_num_seqs": batch.max_num_seqs,
            "max_num_batched_tokens": batch.max_num_batched_tokens,
            "policy": batch.policy,
            "batch_controller": batch.batch_controller,
            "kv_cache_dtype": batch.kv_cache_dtype,
            "warm_pool": autoscaler.min_replicas if autoscaler is not None else None,
        }

    def whole(self, replicas: int, batch: Batch) -> Pair | None:
        """The job for the whole fleet of `replicas`, simulated in parts of `sample_replicas`
        (`simulator.planner.parts`); None where its replicas are not independent."""
        scenario = self.scenario(replicas, batch)
        if parts_refusal(scenario) is not None:
            return None
        job = make_job(
            scenario,
            step_scale=self.step_scale,
            goodput_share=self.goodput_share,
            early_stop=False,
            parts=self.sample_replicas,
        )
        return job, self._context(replicas, batch, "whole fleet")


@dataclass
class Answer:
    """The fewest replicas found (None: none up to `high`), with the outcomes that show it."""

    replicas: int | None
    batch: Batch
    outcome: Outcome  # at `replicas` (full fleet), or at `high` when none meets
    below: Outcome | None = None  # one replica less (full fleet when checked, else the share pass)
    below_is_full: bool = False
    grid: list[dict] = field(default_factory=list)  # per batch setting: the share pass's verdicts
    high: int = 0  # the largest fleet the search tried
    confirmed: bool = True  # False: `outcome` is the share pass's, not a full fleet's


def fleet_scenario(
    base: Scenario,
    gpu: str,
    tensor_parallel: int,
    replicas: int,
    batch: Batch,
    autoscaler: AutoscalerSpec | None = None,
) -> Scenario:
    """`base` on `replicas` x `gpu` (TP `tensor_parallel`) with `batch`; a fixed fleet unless `autoscaler`."""
    data = base.model_dump(mode="json")
    same_hardware = (base.hardware.gpu, base.hardware.tensor_parallel) == (gpu, tensor_parallel)
    data["hardware"] = {
        "gpu": gpu,
        "tensor_parallel": tensor_parallel,
        "calibration": base.hardware.calibration if same_hardware else None,
        # a deployment's fusion thresholds (a map by degree): on its own GPU only
        "fused_all_reduce_mb": base.hardware.fused_all_reduce_mb
        if base.hardware.gpu == gpu
        else {},
        # the server's CUDA-graph launch setting, whatever GPU it runs on
        "graph_steps": base.hardware.graph_steps,
    }
    if autoscaler is None:
        data["cluster"]["autoscaler"]["enabled"] = False
        data["cluster"]["replicas"] = replicas
    else:
        data["cluster"]["autoscaler"] = autoscaler.model_dump(mode="json")
        data["cluster"]["replicas"] = autoscaler.min_replicas
    data["scheduler"].update(batch.scheduler_updates())
    return Scenario.model_validate(data)


def _traffic(scenario: Scenario):
    """The scenario's trace, loaded once per scenario object (the ceilings read its rates and lengths)."""
    from simulator.simulation import load_traffic

    key = id(scenario)
    if _TRACES.get(key, (None,))[0] is not scenario:
        _TRACES.clear()
        _TRACES[key] = (scenario, load_traffic(scenario))
    return _TRACES[key][1]


_TRACES: dict[int, tuple] = {}
