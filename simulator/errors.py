"""The simulator's and planner's typed errors: callers branch on the type, never on the message.

All are `ValueError`s (a user's input is at fault), so code that reports any bad input still catches
them; each message names the input at fault and what would be accepted.
"""


class ScenarioError(ValueError):
    """A scenario that cannot be simulated as given."""


class ModelDoesNotFit(ScenarioError):
    """The model's weights leave no KV block on the GPU at that tensor-parallel degree."""


class PoolTooSmall(ScenarioError):
    """A replica's KV pool is smaller than one request of the traffic may need."""


class PlanError(ValueError):
    """A user error the planner explains (no fleet in range meets the SLO, the model fits no GPU,
    ...): the CLI prints it as `error: ...` and exits 2."""
