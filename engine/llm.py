"""`LLM`: offline batch generation over `LLMEngine`, outputs in prompt order."""

from engine.config import EngineConfig
from engine.core.outputs import RequestOutput
from engine.core.sampling_params import SamplingParams
from engine.llm_engine import LLMEngine


class LLM:
    def __init__(self, model: str, **settings):
        self.engine = LLMEngine(EngineConfig(model=model, **settings))

    def generate(
        self,
        prompts: list[list[int]] | list[str],
        sampling_params: SamplingParams | list[SamplingParams] | None = None,
        use_tqdm: bool = False,
    ) -> list[RequestOutput]:
        if isinstance(sampling_params, list) and len(sampling_params) != len(prompts):
            raise ValueError(
                f"{len(sampling_params)} sampling params for {len(prompts)} prompts; expected one, or one per prompt"
            )
        params = (
            sampling_params
            if isinstance(sampling_params, list)
            else [sampling_params or SamplingParams()] * len(prompts)
        )
        ids = [self.engine.add_request(None, prompt, p) for prompt, p in zip(prompts, params)]
        finished: dict[str, RequestOutput] = {}
        progress = _progress(len(ids), use_tqdm)
        while self.engine.has_unfinished_requests():
            for out in self.engine.step():
                if out.finished:
                    finished[out.request_id] = out
                    progress.update(1)
        progress.close()
        return [finished[i] for i in ids]


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc="generate", disable=not enabled)
