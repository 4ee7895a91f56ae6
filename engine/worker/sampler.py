"""Next-token choice per request: greedy, or temperature + top-k + top-p with an optional per-request seed."""

import torch

from engine.core.request import Request


class Sampler:
    def __init__(self, eos_token_ids: frozenset[int], seed: int = 0):
        self.eos_token_ids = eos_token_ids
        self.seed = seed
        self.generators: dict[torch.device, torch.Generator] = {}

    def __call__(self, logits: torch.Tensor, requests: list[Request]) -> list[int]:
        # logits: [S, vocab] float32, one row per request producing a token
        logits = self._mask_early_stops(logits, requests)
        tokens = logits.argmax(dim=-1)
        for i, req in enumerate(requests):
            if not req.params.greedy:
                tokens[i] = self._draw(logits[i], req)
        return tokens.tolist()

    def _mask_early_stops(self, logits: torch.Tensor, requests: list[Request]) -> torch.Tensor:
        """Before min_tokens, EOS and stop tokens cannot be chosen."""
        rows = [i for i, r in enumerate(requests) if r.num_output_tokens < r.params.min_tokens]
        if not rows:
            return logits
        logits = logits.clone()
        for i in rows:
            params = requests[i].params
            banned = (
                params.stop_token_ids
                if params.ignore_eos
                else params.stop_token_ids.union(self.eos_token_ids)
            )
            banned = [t for t in banned if 0 <= t < logits.shape[-1]]
            if banned:
                logits[i, banned] = float("-inf")
        return logits

    def _draw(self, row: torch.Tensor, req: Request) -> int:
        # row: [vocab] float32
        params = req.params
        sorted_logits, order = (row / params.temperature).sort(descending=True)
        if params.top_k > 0:
            sorted_logits[params.top_k :] = float("-inf")
        probs = sorted_logits.softmax(dim=-1)
        if params.top_p < 1:
            outside = probs.cumsum(dim=-1) - probs > params.top_p  # keeps at least the top token
            probs = probs.masked_fill(outside, 0.0)
        choice = torch.multinomial(probs, 1, generator=self._generator(req, row.device))
        return int(order[choice])

    def _generator(self, req: Request, device: torch.device) -> torch.Generator:
        if req.params.seed is None:
            if device not in self.generators:
                self.generators[device] = torch.Generator(device=device).manual_seed(self.seed)
            return self.generators[device]
        if req.generator is None:
            req.generator = torch.Generator(device=device).manual_seed(req.params.seed)
        return req.generator
