"""What one `Scheduler.schedule()` returns (`SchedulerOutput`: the requests scheduled with their new
tokens, the preempted ones, how the admission went, and the step's shape), and the KV pool's figures
at a moment (`KVStats`: usage, utilization and fragmentation). Pure Python, never imports torch;
apart from `engine.core.scheduler` because the engine (`LLMEngine`), the simulated replica and the decode
stretch read these without the scheduler's policy.
"""

from dataclasses import dataclass, field

from engine.core.request import Request
from engine.core.step_shape import StepShape


@dataclass
class SchedulerOutput:
    scheduled: list[tuple[Request, int]] = field(
        default_factory=list
    )  # (request, new tokens this step)
    preempted: list[Request] = field(default_factory=list)
    # how the admission of waiting requests went (what `decode_stretch` needs to know it stays so):
    num_admitted: int = 0  # waiting requests started this step (the last entries of `scheduled`)
    num_skipped: int = 0  # passed over for their tenant's quota: the first ones in `waiting`
    blocked: Request | None = None  # the waiting request after them that found no room in the pool
    host_loaded_blocks: int = 0  # KV blocks brought back from the host tier for this step
    max_decode_steps: int = field(default=1, repr=False)  # set by `Scheduler.decode_stretch`
    # the stretch's block crossings (step * len(scheduled) + position, sorted) and the KV figures at its
    # start (stored token slots, used blocks): what `Scheduler.decode_stretch_kv` reads
    _crossings: list[int] = field(default_factory=list, repr=False, compare=False)
    _kv_start: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    _shape: StepShape | None = field(default=None, repr=False, compare=False)
    # the shape's two lists, filled as `schedule()` adds each request (saves a pass over `scheduled`)
    _prefill: list[tuple[int, int]] = field(default_factory=list, repr=False, compare=False)
    _decode: list[int] = field(default_factory=list, repr=False, compare=False)

    @property
    def shape(self) -> StepShape:
        """The step's shape, as of `schedule()` (made at its end; for an output built otherwise, on the
        first read, before `update`)."""
        if self._shape is None:
            prefill, decode = [], []
            for req, num_new in self.scheduled:
                computed = req.num_computed_tokens
                if num_new == 1 and computed > 0:
                    decode.append(computed + 1)
                else:
                    prefill.append((num_new, computed))
            self._shape = StepShape(tuple(prefill), tuple(decode))
        return self._shape

    @property
    def is_empty(self) -> bool:
        return not self.scheduled


@dataclass(frozen=True)
class KVStats:
    num_blocks: int
    num_used_blocks: int
    num_free_blocks: int
    num_cached_free_blocks: int  # free but still holding a reusable prefix
    tokens_stored: int  # token slots holding a running request's KV
    slots_reserved: int  # token slots of all used blocks

    @property
    def usage(self) -> float:
        return self.num_used_blocks / self.num_blocks

    @property
    def utilization(self) -> float:
        """Tokens stored / slots reserved: 1 - internal fragmentation."""
        return self.tokens_stored / self.slots_reserved if self.slots_reserved else 1.0

    @property
    def fragmented_slots(self) -> int:
        return self.slots_reserved - self.tokens_stored
