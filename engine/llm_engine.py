"""LLMEngine: the scheduler's decisions executed by the model runner, one `step()` at a time."""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import count

import torch

from engine.config import EngineConfig
from engine.core.config import engine_configs
from engine.core.outputs import RequestOutput
from engine.core.request import Request
from engine.core.sampling_params import SamplingParams
from engine.core.scheduler import Scheduler
from engine.core.scheduler_output import KVStats
from engine.core.step_shape import StepShape
from engine.model.config import ModelConfig
from engine.tokenizer import load_tokenizer
from engine.worker.kv_transfer import apply_host_moves, host_kv_cache
from engine.worker.model_runner import ModelRunner, ModelRunnerOutput
from engine.worker.resources import resolve_device, resolve_dtype, resolve_num_kv_blocks

log = logging.getLogger("surgeplan.engine")


@dataclass(frozen=True)
class StepStats:
    shape: StepShape
    schedule_s: float
    prepare_s: float
    forward_s: float
    sample_s: float
    update_s: float
    total_s: float
    num_preempted: int
    cuda_graph: bool = False  # the forward was a captured graph's replay


class LLMEngine:
    def __init__(self, config: EngineConfig):
        self.config = config
        self.model_config = ModelConfig.load(config.model)
        self.device = resolve_device(config.device)
        self.dtype = resolve_dtype(config.dtype, self.model_config, self.device)
        max_model_len = config.max_model_len or self.model_config.max_position_embeddings
        if max_model_len > self.model_config.max_position_embeddings:
            raise ValueError(
                f"max_model_len={max_model_len} exceeds the model's max_position_embeddings="
                f"{self.model_config.max_position_embeddings}"
            )
        window = self.model_config.sliding_window
        if window is not None and max_model_len > window:
            raise ValueError(
                f"max_model_len={max_model_len} exceeds the model's sliding_window={window}; the engine "
                f"attends over whole contexts, so expected max_model_len ≤ {window}"
            )
        num_kv_blocks = resolve_num_kv_blocks(
            config, self.model_config, self.dtype, self.device, max_model_len
        )
        self.cache_config, self.scheduler_config = engine_configs(
            config, num_kv_blocks=num_kv_blocks, max_model_len=max_model_len
        )
        self.model_runner = ModelRunner(
            self.model_config,
            config.model,
            config.load_format,
            self.dtype,
            self.device,
            self.cache_config,
            config.seed,
            max_num_seqs=self.scheduler_config.max_num_seqs,
            max_model_len=max_model_len,
            enforce_eager=config.enforce_eager,
        )
        log.info(self.kv_cache_line())
        self.scheduler = Scheduler(
            self.scheduler_config, self.cache_config, frozenset(self.model_config.eos_token_ids)
        )
        self.host_tier = self.scheduler.block_manager.host_tier
        self.host_kv = None
        if (
            self.host_tier is not None
        ):  # evicted prefix blocks kept in host memory, loaded back on a hit
            self.host_tier.record_moves = True
            self.host_kv = host_kv_cache(self.model_runner.kv_caches, self.host_tier.num_blocks)
        self.tokenizer = load_tokenizer(
            config.model,
            self.model_config.vocab_size,
            self.model_config.bos_token_id,
            (self.model_config.eos_token_ids or (None,))[0],
        )
        self.requests: dict[str, Request] = {}
        # the engine's clock: wall time, or a simulated one (the simulator's fidelity test drives the
        # engine with a clock advanced by the cost model)
        self.clock: Callable[[], float] = time.perf_counter
        self.last_step: StepStats | None = None
        self._ids = count()

    # ---- requests ----------------------------------------------------------------------------------
    def add_request(
        self,
        request_id: str | None,
        prompt: list[int] | str,
        params: SamplingParams | None = None,
        arrival_time: float | None = None,
        tenant: str = "default",
    ) -> str:
        """Validates and queues a request; a bad one raises ValueError and leaves the others untouched."""
        request_id = str(next(self._ids)) if request_id is None else request_id
        if request_id in self.requests:
            raise ValueError(f"request id {request_id!r} is already in flight; expected a new id")
        params = params or SamplingParams()
        token_ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        self._validate(token_ids, params)
        req = Request(
            request_id,
            token_ids,
            params,
            self.clock() if arrival_time is None else arrival_time,
            tenant,
        )
        self._check_fits_pool(req)
        self.requests[request_id] = req
        self.scheduler.add_request(req)
        return request_id

    def _validate(self, token_ids: list[int], params: SamplingParams) -> None:
        max_len, vocab = self.scheduler_config.max_model_len, self.model_config.vocab_size
        if not token_ids:
            raise ValueError("prompt is empty; expected at least one token")
        if len(token_ids) > max_len:
            raise ValueError(
                f"prompt has {len(token_ids)} tokens, longer than max_model_len={max_len}"
            )
        if len(token_ids) + params.max_tokens > max_len:
            raise ValueError(
                f"prompt ({len(token_ids)} tokens) + max_tokens ({params.max_tokens}) = "
                f"{len(token_ids) + params.max_tokens} exceeds max_model_len={max_len}"
            )
        bad = next((t for t in token_ids if not isinstance(t, int) or not 0 <= t < vocab), None)
        if bad is not None:
            raise ValueError(
                f"prompt token id {bad!r} is outside the vocabulary; expected integers in [0, {vocab})"
            )

    def _check_fits_pool(self, req: Request) -> None:
        need, pool = self.scheduler.max_blocks_needed(req), self.cache_config.num_kv_blocks
        if need > pool:
            raise ValueError(
                f"request {req.request_id!r} may need {need} KV blocks but the pool has {pool}; "
                "shorten the prompt or max_tokens, or give the cache more blocks"
            )
        quota = self.cache_config.tenant_block_quota.get(req.tenant)
        if quota is not None and need > quota:
            raise ValueError(
                f"request {req.request_id!r} may need {need} KV blocks but tenant {req.tenant!r} "
                f"has a quota of {quota}"
            )

    def abort_request(self, request_id: str) -> bool:
        req = self.requests.pop(request_id, None)
        if req is None:
            return False
        self.scheduler.abort_request(req, self.clock())
        return True

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    def kv_cache_line(self) -> str:
        """The startup line: the KV pool's blocks, storage dtype and bytes."""
        cache = self.cache_config
        pool_bytes = self.model_runner.kv_cache_bytes
        return (
            f"KV cache: {cache.num_kv_blocks} blocks x {cache.block_size} tokens = "
            f"{cache.num_token_slots} token slots, kv_cache_dtype={cache.kv_cache_dtype} "
            f"({self.model_runner.kv_caches[0].k.dtype}), {pool_bytes / 2**30:.3f} GiB"
        )

    def kv_stats(self) -> KVStats:
        return self.scheduler.kv_stats()

    # ---- one step ----------------------------------------------------------------------------------
    def step(self) -> list[RequestOutput]:
        """Schedules, runs and samples one step; returns an output for every request that got a token."""
        t0 = self.clock()
        out = self.scheduler.schedule(now=t0)
        shape = out.shape
        if self.host_tier is not None and self.host_tier.moves:
            apply_host_moves(self.model_runner.kv_caches, self.host_kv, self.host_tier.take_moves())
        t1 = self.clock()
        result = (
            self.model_runner.execute(out.scheduled) if out.scheduled else ModelRunnerOutput.empty()
        )
        t2 = self.clock()
        progressed = self.scheduler.update(out, result.sampled_token_ids, now=t2)
        outputs = [self._output(req) for req in progressed]
        t3 = self.clock()
        self.last_step = StepStats(
            shape,
            t1 - t0,
            result.prepare_s,
            result.forward_s,
            result.sample_s,
            t3 - t2,
            t3 - t0,
            len(out.preempted),
            result.cuda_graph,
        )
        return outputs

    def _output(self, req: Request) -> RequestOutput:
        if not req.is_finished:
            return RequestOutput.of(req)
        self.requests.pop(req.request_id, None)
        return RequestOutput.of(req, self.tokenizer.decode(req.output_token_ids))


def default_device() -> torch.device:
    return resolve_device(None)
