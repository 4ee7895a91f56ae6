"""`surgeplan profile`: time the engine's real `step()` over a grid of constructed batches and write
a calibration (measured points + the cost model fitted on them).

Batches are built through the public API only: requests with random prompts of chosen lengths,
stepped until they decode; prefix-cached prefills reuse a prompt's first full blocks; mixed steps
add one prompt while a decode batch runs. Every recorded shape is the one the engine reports
(`engine.last_step.shape`), never the one we aimed for.
The grid it sweeps is `profile_grid.py`; the command's options are `profile_command.py`.
"""

import json
import platform
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from tqdm import tqdm

from engine.core.sampling_params import SamplingParams
from engine.model.presets import PRESETS, preset_config
from simulator.calibration.cost_fit import fit_calibration
from simulator.calibration.profile_grid import ProfileGrid
from simulator.calibration.schema import (
    Calibration,
    DeviceInfo,
    ProfilePoint,
    Provenance,
    ShapeRecord,
    SoftwareInfo,
    StepSample,
)
from simulator.hardware.catalog import local_cpu, match_device
from simulator.model_spec import ModelSpec


class Profiler:
    """Drives one engine through a grid; `run()` returns the measured points."""

    def __init__(
        self,
        model: str,
        grid: ProfileGrid,
        load_format: str = "dummy",
        device: str | None = None,
        dtype: str = "auto",
        seed: int = 0,
        enforce_eager: bool = False,
    ):
        self.model, self.grid, self.load_format = model, grid, load_format
        from engine.llm import LLM  # torch loads here, not when the CLI imports this module

        settings = grid.engine_settings()
        self.llm = LLM(
            model=model,
            load_format=load_format,
            dtype=dtype,
            device=device,
            seed=seed,
            enforce_eager=enforce_eager,
            num_kv_blocks=grid.num_kv_blocks(),
            **settings.model_dump(exclude={"load_format"}),
        )
        self.engine = self.llm.engine
        self.settings = settings.model_copy(update={"load_format": load_format})
        self.rng = np.random.default_rng(seed)
        self._next_id = 0

    # ---- request plumbing --------------------------------------------------------------------
    def _prompt(self, length: int) -> list[int]:
        return self.rng.integers(0, self.engine.model_config.vocab_size, size=length).tolist()

    def _add(self, prompt: list[int], max_tokens: int) -> str:
        self._next_id += 1
        request_id = f"profile-{self._next_id}"
        params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
        self.engine.add_request(request_id, prompt, params)
        return request_id

    def _step(self) -> StepSample:
        cpu_start = time.process_time()
        self.engine.step()
        cpu_s = time.process_time() - cpu_start
        stats = self.engine.last_step
        return StepSample(
            shape=ShapeRecord.of(stats.shape),
            total_s=stats.total_s,
            schedule_s=stats.schedule_s,
            prepare_s=stats.prepare_s,
            forward_s=stats.forward_s,
            sample_s=stats.sample_s,
            cpu_s=cpu_s,
        )

    def _run_alone(self, prompt: list[int]) -> StepSample:
        """Prefill one prompt by itself; returns its first step (the one that computed the chunk)."""
        self._add(prompt, max_tokens=1)
        first = self._step()
        while self.engine.has_unfinished_requests():
            self._step()
        return first

    # ---- grid sections -----------------------------------------------------------------------
    def prefill_points(self) -> Iterator[ProfilePoint]:
        """Repeats go round-robin over the chunk sizes, so a burst of load from a neighbour on a
        shared host lands on different points' repeats instead of on all repeats of one point."""
        for prefix_len in self.grid.cached_prefixes:
            prefix = self._prompt(prefix_len)
            if prefix_len:
                self._run_alone(prefix)  # its full blocks stay in the prefix cache
            rounds = [
                [
                    self._run_alone(prefix + self._prompt(chunk))
                    for chunk in self.grid.prefill_chunks
                ]
                for _ in range(self.grid.warmup + self.grid.repeats)
            ]
            for samples in zip(*rounds[self.grid.warmup :]):
                yield _point(list(samples))

    def decode_points(self) -> Iterator[ProfilePoint]:
        for context in self.grid.decode_contexts:
            active = [
                self._add(
                    self._prompt(context - 1), max_tokens=self.grid.decode_tokens_needed(context)
                )
                for _ in range(max(self.grid.decode_batches))
            ]
            while self._step().shape.prefill_chunks:
                pass  # until a step with no prefill: everyone decodes
            for batch in sorted(self.grid.decode_batches, reverse=True):
                while len(active) > batch:
                    self.engine.abort_request(active.pop())
                samples = [self._step() for _ in range(self.grid.warmup + self.grid.repeats)]
                yield _point(samples[self.grid.warmup :])
                if batch in self.grid.mixed_batches:
                    yield from self._mixed_points()
            for request_id in active:
                self.engine.abort_request(request_id)

    def _mixed_points(self) -> Iterator[ProfilePoint]:
        rounds = []
        for _ in range(self.grid.repeats):
            round_samples = []
            for chunk in self.grid.mixed_chunks:
                self._add(self._prompt(chunk), max_tokens=1)
                sample = self._step()
                if sum(new for new, _ in sample.shape.prefill_chunks) != chunk:
                    raise RuntimeError(
                        f"profiler: a mixed step scheduled {sample.shape.prefill_chunks} instead of one "
                        f"{chunk}-token chunk; the grid's token budget or sequence limit is too small"
                    )
                round_samples.append(sample)
            rounds.append(round_samples)
        for samples in zip(*rounds):
            yield _point(list(samples))

    def run(self, progress: bool = True, threads: int | None = None) -> list[ProfilePoint]:
        """`threads`: torch intra-op threads while profiling (None: leave torch's default)."""
        import torch

        previous = torch.get_num_threads()
        torch.set_num_threads(threads or previous)
        try:
            return self._run(progress)
        finally:
            torch.set_num_threads(previous)

    def _run(self, progress: bool) -> list[ProfilePoint]:
        passes: list[list[ProfilePoint]] = []
        total = self.grid.num_points * self.grid.passes
        with tqdm(total=total, desc=f"profile {self.model}", disable=not progress) as bar:
            self._run_alone(
                self._prompt(max(self.grid.prefill_chunks))
            )  # warm the allocator and kernels
            for _ in range(self.grid.passes):
                points = []
                for section in (self.prefill_points(), self.decode_points()):
                    for point in section:
                        points.append(point)
                        bar.update(1)
                passes.append(points)
        # the same grid position in every pass becomes one point with all its repeats
        return [
            _point([sample for point in same for sample in point.samples]) for same in zip(*passes)
        ]

    def calibration(
        self, points: list[ProfilePoint], fit: bool = True, statistic: str = "median"
    ) -> Calibration:
        calibration = Calibration(
            name=f"{self.model}@{_device_name(self.engine.device)}",
            label="measured",
            device=_device_info(self.engine.device),
            software=SoftwareInfo.current(),
            model=_model_spec(self.model, self.engine),
            dtype=_dtype_name(self.engine.dtype),
            block_size=self.settings.block_size,
            engine=self.settings,
            points=points,
            provenance=Provenance(
                source="surgeplan profile",
                method="engine.step() wall time on constructed batches",
                notes=[
                    f"grid: {self.grid.model_dump_json()}",
                    "decode-only steps: "
                    + (
                        "CUDA graph replays"
                        if self.engine.model_runner.decode_graphs is not None
                        else "eager"
                    ),
                ],
            ),
        )
        return fit_calibration(calibration, statistic=statistic) if fit else calibration


def _point(samples: list[StepSample]) -> ProfilePoint:
    if any(
        not (sample.shape.prefill_chunks or sample.shape.decode_context_lens) for sample in samples
    ):
        raise RuntimeError(
            "profiler: a timed step did no work (its requests had finished); "
            "this is a bug in the grid's token budget"
        )
    shape = samples[len(samples) // 2].shape
    return ProfilePoint(kind=_kind(shape), shape=shape, samples=samples)


def _kind(shape: ShapeRecord) -> str:
    if not shape.prefill_chunks:
        return "decode"
    if shape.decode_context_lens:
        return "mixed"
    return "prefill_cached" if any(cached for _, cached in shape.prefill_chunks) else "prefill"


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _model_spec(model: str, engine) -> ModelSpec:
    if model in PRESETS:
        return ModelSpec.from_hf_config(
            preset_config(model), name=model, dtype=_dtype_name(engine.dtype)
        )
    config = json.loads((Path(model) / "config.json").read_text())
    return ModelSpec.from_hf_config(config, name=Path(model).name, dtype=_dtype_name(engine.dtype))


def _device_name(device) -> str:
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine() or "cpu"


def _device_info(device) -> DeviceInfo:
    import torch

    if device.type != "cuda":
        return DeviceInfo(
            name=_device_name(device),
            kind="cpu",
            memory_bytes=local_cpu().memory_bytes,
            hardware="local-cpu",
        )
    name = torch.cuda.get_device_name(device)
    memory_bytes = torch.cuda.get_device_properties(device).total_memory
    return DeviceInfo(
        name=name, kind="cuda", memory_bytes=memory_bytes, hardware=match_device(name, memory_bytes)
    )


def profile(
    model: str,
    quick: bool = False,
    load_format: str = "dummy",
    device: str | None = None,
    dtype: str = "auto",
    out: Path | None = None,
    seed: int = 0,
    progress: bool = True,
    grid: ProfileGrid | None = None,
    threads: int | None = None,
    statistic: str = "median",
    enforce_eager: bool = False,
) -> Calibration:
    """Profile `model` and return (and save to `out`) its measured, fitted calibration.
    `statistic` summarises each point's repeats for the fit: median or min wall time, or `cpu`
    (process CPU time: immune to neighbours on a shared host; use with threads=1 on a CPU).
    `enforce_eager` times every step eagerly, as `serve --enforce-eager` runs (on a GPU decode-only
    steps otherwise replay CUDA graphs; the calibration's provenance says which ran)."""
    grid = grid or (ProfileGrid.quick() if quick else ProfileGrid.full())
    profiler = Profiler(
        model,
        grid,
        load_format=load_format,
        device=device,
        dtype=dtype,
        seed=seed,
        enforce_eager=enforce_eager,
    )
    calibration = profiler.calibration(
        profiler.run(progress=progress, threads=threads), statistic=statistic
    )
    if out is not None:
        calibration.save(out)
    return calibration
