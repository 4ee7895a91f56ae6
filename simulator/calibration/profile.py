"""`surgeplan profile`: time the engine's real `step()` over a grid of constructed batches and write
a calibration (measured points + the cost model fitted on them).

Batches are built through the public API only: requests with random prompts of chosen lengths,
stepped until they decode; prefix-cached prefills reuse a prompt's first full blocks; mixed steps
add one prompt while a decode batch runs. Every recorded shape is the one the engine reports
(`engine.last_step.shape`), never the one we aimed for.
"""

import json
import platform
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import typer
from pydantic import BaseModel, Field
from tqdm import tqdm

from engine.core.sampling_params import SamplingParams
from engine.model.presets import PRESETS, preset_config
from simulator.calibration.cost_model import fit_calibration
from simulator.calibration.schema import (
    Calibration,
    DeviceInfo,
    EngineSettings,
    ProfilePoint,
    Provenance,
    ShapeRecord,
    SoftwareInfo,
    StepSample,
)
from simulator.hardware.catalog import local_cpu, match_device
from simulator.model_spec import ModelSpec


class ProfileGrid(BaseModel):
    decode_batches: list[int] = Field(min_length=1)
    decode_contexts: list[int] = Field(min_length=1)
    prefill_chunks: list[int] = Field(min_length=1)
    cached_prefixes: list[int] = [0]
    mixed_batches: list[int] = []
    mixed_chunks: list[int] = []
    repeats: int = Field(default=5, ge=1, description="timed repeats per point in each pass")
    warmup: int = Field(default=1, ge=0)
    # Passes sweep the whole grid again, seconds later: a burst of load on a shared host then
    # cannot slow every repeat of a point, and `min` over the passes finds the quiet time.
    passes: int = Field(default=1, ge=1)
    block_size: int = Field(default=16, ge=1)

    @classmethod
    def quick(cls) -> "ProfileGrid":
        """Small enough for CI on two CPU cores (well under a minute for `cpu-small`)."""
        return cls(
            decode_batches=[1, 2, 4, 8, 16],
            decode_contexts=[32, 80, 128],
            prefill_chunks=[16, 32, 64, 128, 192, 256],
            cached_prefixes=[0, 128],
            mixed_batches=[4],
            mixed_chunks=[32, 128],
            repeats=2,
            warmup=1,
            passes=3,
        )

    @classmethod
    def full(
        cls, max_num_seqs: int = 64, max_num_batched_tokens: int = 1024, max_model_len: int = 2048
    ) -> "ProfileGrid":
        batches = sorted(
            {1, 2, 4, 8, 16, 32, 64, 128, 256, max_num_seqs} & set(range(1, max_num_seqs + 1))
        )
        contexts = [
            c for c in (32, 128, 256, 512, 1024, 2048, 4096, 8192) if c <= max_model_len // 2
        ] or [max_model_len // 4]
        chunks = sorted(
            {
                c
                for c in (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
                if c <= max_num_batched_tokens
            }
            | {max_num_batched_tokens}
        )
        return cls(
            decode_batches=batches,
            decode_contexts=contexts,
            prefill_chunks=chunks,
            cached_prefixes=[0, max(16, max_model_len // 4)],
            mixed_batches=batches[len(batches) // 2 :: 2],
            mixed_chunks=chunks[1::2],
            repeats=5,
            warmup=2,
        )

    @property
    def token_budget(self) -> int:
        return max(
            max(self.prefill_chunks), max(self.mixed_batches + [0]) + max(self.mixed_chunks + [0])
        )

    def decode_tokens_needed(self, context: int) -> int:
        """Tokens each long-lived request must be allowed to generate at this context length: the
        early ones decode while the last prompts are still prefilling, then every timed step."""
        prefill_steps = -(-max(self.decode_batches) * context // self.token_budget)
        timed = len(self.decode_batches) * (self.warmup + self.repeats)
        mixed = len(self.mixed_chunks) * self.repeats * len(self.mixed_batches)
        return prefill_steps + timed + mixed + 4

    def engine_settings(self) -> EngineSettings:
        max_model_len = max(
            max(c + self.decode_tokens_needed(c) for c in self.decode_contexts),
            max(self.cached_prefixes) + max(self.prefill_chunks) + 1,
        )
        # one more sequence than the largest batch, so a mixed step's new prompt is never left waiting
        return EngineSettings(
            block_size=self.block_size,
            max_num_seqs=max(self.decode_batches) + 1,
            max_num_batched_tokens=self.token_budget,
            max_model_len=max_model_len,
            enable_prefix_caching=True,
        )

    def num_kv_blocks(self) -> int:
        settings = self.engine_settings()
        decode = max(self.decode_batches) * settings.max_model_len
        prefill = (self.repeats + self.warmup + 2) * (
            max(self.cached_prefixes) + max(self.prefill_chunks)
        )
        return (decode + prefill + max(self.mixed_chunks + [0]) * 2) // self.block_size + 64

    @property
    def num_points(self) -> int:
        decode = len(self.decode_batches) * len(self.decode_contexts)
        mixed = len(self.mixed_batches) * len(self.mixed_chunks) * len(self.decode_contexts)
        return decode + mixed + len(self.prefill_chunks) * len(self.cached_prefixes)


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
                notes=[f"grid: {self.grid.model_dump_json()}"],
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
) -> Calibration:
    """Profile `model` and return (and save to `out`) its measured, fitted calibration.
    `statistic` summarises each point's repeats for the fit: median or min wall time, or `cpu`
    (process CPU time: immune to neighbours on a shared host; use with threads=1 on a CPU)."""
    grid = grid or (ProfileGrid.quick() if quick else ProfileGrid.full())
    profiler = Profiler(model, grid, load_format=load_format, device=device, dtype=dtype, seed=seed)
    calibration = profiler.calibration(
        profiler.run(progress=progress, threads=threads), statistic=statistic
    )
    if out is not None:
        calibration.save(out)
    return calibration


def profile_command(
    model: str = typer.Option(None, "--model", help="model preset or local model directory"),
    load_format: str = typer.Option("dummy", help="dummy (random weights), auto or safetensors"),
    device: str = typer.Option(None, help="cpu or cuda (default: cuda when available)"),
    dtype: str = typer.Option("auto"),
    out: Path = typer.Option(None, help="calibration JSON to write"),
    quick: bool = typer.Option(False, help="a small grid that fits in CI"),
    seed: int = typer.Option(0),
    threads: int = typer.Option(None, help="torch CPU threads while profiling (default: torch's)"),
    statistic: str = typer.Option(
        "median", help="fit on: median or min wall time, or cpu (CPU time)"
    ),
    max_num_seqs: int = typer.Option(64, help="full grid: largest decode batch"),
    max_num_batched_tokens: int = typer.Option(1024, help="full grid: largest prefill chunk"),
    max_model_len: int = typer.Option(2048, help="full grid: decode contexts reach half of this"),
    passes: int = typer.Option(
        None, help="grid sweeps (default: 3 quick, 1 full); more resist noisy hosts"
    ),
    from_steps: Path = typer.Option(
        None,
        "--from-steps",
        help="fit on a live workload's step log instead "
        "(written by `surgeplan validate --save-steps`)",
    ),
) -> None:
    """Time the engine's real step() over prefill, prefix-cached, decode and mixed batches; fit the cost model."""
    if from_steps is not None:
        from simulator.calibration.from_steps import calibration_from_steps

        try:
            calibration = calibration_from_steps(from_steps)
        except ValueError as error:
            typer.echo(f"error: {error}", err=True)
            raise typer.Exit(code=2) from None
        out = calibration.save(out or Path(f"calibration-{calibration.model.name}-steps.json"))
        error = calibration.cost_model.fit_errors[0]
        typer.echo(f"{calibration.provenance.notes[0]} of {from_steps} -> {out}")
        typer.echo(
            f"cost model: MAPE {100 * error.mape_train:.1f}% on its steps, "
            f"{100 * error.mape_cross_validated:.1f}% held out ({error.folds}-fold)"
        )
        return
    if model is None:
        typer.echo("error: --model is needed (or --from-steps FILE)", err=True)
        raise typer.Exit(code=2)
    out = out or Path(f"calibration-{Path(model).name}.json")
    grid = (
        ProfileGrid.quick()
        if quick
        else ProfileGrid.full(max_num_seqs, max_num_batched_tokens, max_model_len)
    )
    grid = grid.model_copy(update={"passes": passes or grid.passes})
    calibration = profile(
        model,
        load_format=load_format,
        device=device,
        dtype=dtype,
        out=out,
        seed=seed,
        grid=grid,
        threads=threads,
        statistic=statistic,
    )
    error = calibration.cost_model.fit_errors[0]
    typer.echo(f"{len(calibration.points)} points on {calibration.device.name} -> {out}")
    typer.echo(
        f"cost model: MAPE {100 * error.mape_train:.1f}% on its points, "
        f"{100 * error.mape_cross_validated:.1f}% held out ({error.folds}-fold)"
    )
