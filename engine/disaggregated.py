"""Two `LLMEngine`s in one process, one prefill-only and one decode-only, handing requests over with
their KV blocks copied between the two paged caches: the live proof of the scheduler's roles
(`engine.core.kv_handoff`). Greedy outputs equal one co-located engine's.

Each round: the prefill engine steps; the requests it handed over (first token sampled, blocks held)
are received by the decode engine, which reserves blocks for them as room allows; their KV is copied
into those blocks and the prefill side's are freed; then the decode engine steps.
"""

from dataclasses import dataclass

from engine.config import EngineConfig
from engine.core.block_manager import blocks_for
from engine.core.kv_handoff import handoff_copy, kv_tokens
from engine.core.outputs import RequestOutput
from engine.core.request import Request
from engine.core.sampling_params import SamplingParams
from engine.llm_engine import LLMEngine
from engine.worker.kv_transfer import copy_kv_blocks


@dataclass
class TransferStats:
    num_transfers: int = 0
    bytes: int = 0


class DisaggregatedEngines:
    def __init__(self, prefill: EngineConfig, decode: EngineConfig):
        if prefill.role != "prefill" or decode.role != "decode":
            raise ValueError(
                f"roles are {prefill.role!r} and {decode.role!r}; expected 'prefill' then 'decode'"
            )
        if prefill.block_size != decode.block_size:
            raise ValueError(
                f"block_size {prefill.block_size} (prefill) vs {decode.block_size} (decode); expected "
                "the same on both sides, so blocks map one to one"
            )
        self.prefill = LLMEngine(prefill)
        self.decode = LLMEngine(decode)
        self._in_flight: dict[
            str, Request
        ] = {}  # request id -> the prefill side's request, holding blocks
        self.stats = TransferStats()

    def add_request(
        self, request_id: str | None, prompt: list[int] | str, params: SamplingParams | None = None
    ) -> str:
        request_id = self.prefill.add_request(request_id, prompt, params)
        request = self.prefill.requests[request_id]
        need, pool = (
            self.decode.scheduler.max_blocks_needed(request),
            self.decode.cache_config.num_kv_blocks,
        )
        if need > pool:
            self.prefill.abort_request(request_id)
            raise ValueError(
                f"request {request_id!r} may need {need} KV blocks but the decode engine's pool has "
                f"{pool}; expected a shorter request or a larger decode pool"
            )
        return request_id

    def has_unfinished_requests(self) -> bool:
        return (
            self.prefill.has_unfinished_requests()
            or self.decode.has_unfinished_requests()
            or bool(self._in_flight)
        )

    def step(self) -> list[RequestOutput]:
        """One round; returns the outputs of requests that finished (on either side)."""
        finished = [
            out
            for out in self.prefill.step()
            if out.finished and out.finish_reason != "handed_over"
        ]
        for req in self.prefill.scheduler.take_handed_over():
            copy = handoff_copy(req)
            self._in_flight[req.request_id] = req
            self.decode.requests[copy.request_id] = copy
            self.decode.scheduler.receive(copy)
        for copy in self.decode.scheduler.start_receives():
            source = self._in_flight.pop(copy.request_id)
            num_blocks = blocks_for(kv_tokens(copy), self.decode.cache_config.block_size)
            self.stats.bytes += copy_kv_blocks(
                self.prefill.model_runner.kv_caches,
                source.block_table[:num_blocks],
                self.decode.model_runner.kv_caches,
                copy.block_table[:num_blocks],
            )
            self.stats.num_transfers += 1
            self.prefill.scheduler.release_handed_over(source)
            self.decode.scheduler.finish_receive(copy)
        finished += [out for out in self.decode.step() if out.finished]
        return finished

    def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[RequestOutput]:
        ids = [self.add_request(None, prompt, params) for prompt in prompts]
        done: dict[str, RequestOutput] = {}
        while self.has_unfinished_requests():
            for out in self.step():
                done[out.request_id] = out
        return [done[i] for i in ids]
