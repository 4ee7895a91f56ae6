"""The server's own settings, each defined once as a pydantic field (bound, default, help): who may call
(API keys, keys bound to tenants), each tenant's limits, admission and drain. `surgeplan serve` derives
its options from these fields with `cli_option`, as it does for `EngineConfig`.

A tenant-keys file (JSON or YAML) binds API keys to tenants and gives tenants optional limits:

    {"keys": {"KEY": "TENANT", ...},
     "tenants": {"TENANT": {"kv_blocks": N, "requests_per_s": R, "prompt_tokens_per_s": T,
                            "max_concurrent": C}, ...}}

A limit a tenant does not set is the `default` tenant's. Once any tenant has a limit, the `default`
tenant must have it too, and a tenant the configuration does not name is served as `default`: no
tenant is unlimited by accident, and naming an unknown tenant does not dodge a limit.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from engine.settings_file import read_mapping

DEFAULT_TENANT = "default"
LIMITS = ("kv_blocks", "requests_per_s", "prompt_tokens_per_s", "max_concurrent")
MAX_KEY_CHARS = 512
OPEN_TENANT_CHARS = 64
OPEN_TENANT_NAME = re.compile(rf"[A-Za-z0-9._:-]{{1,{OPEN_TENANT_CHARS}}}")
TENANT_KEYS_FILE = (
    "a mapping with 'keys' and 'tenants' (JSON or YAML), as "  # what its errors expect
    '{"keys": {KEY: TENANT}, "tenants": {TENANT: {limits}}}'
)


class TenantLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kv_blocks: int | None = Field(
        None, ge=1, description="KV blocks the tenant's requests may hold at once"
    )
    requests_per_s: float | None = Field(
        None, gt=0, allow_inf_nan=False, description="requests admitted per second (token bucket)"
    )
    prompt_tokens_per_s: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="prompt tokens admitted per second (token bucket)",
    )
    max_concurrent: int | None = Field(None, ge=1, description="requests in flight at once")


def _check_key(key: object, where: str) -> str:
    """A key's problem is named by its position, never by its value (keys must not reach logs)."""
    if not isinstance(key, str) or not key or key != key.strip() or any(c.isspace() for c in key):
        raise ValueError(
            f"{where} is not a usable API key; expected a non-empty string without spaces"
        )
    if len(key) > MAX_KEY_CHARS:
        raise ValueError(f"{where} has {len(key)} characters; expected at most {MAX_KEY_CHARS}")
    return key


class TenantKeys(BaseModel):
    """The `--tenant-keys` file: API key → tenant, and tenant → limits."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)
    keys: dict[str, str] = Field(
        default_factory=dict, repr=False, description="API key → its tenant"
    )
    tenants: dict[str, TenantLimits] = Field(
        default_factory=dict, description="tenant → its limits"
    )

    @field_validator("keys", mode="before")
    @classmethod
    def _keys_usable(cls, keys: Any) -> Any:
        if not isinstance(keys, dict):
            raise ValueError(
                f"keys is a {type(keys).__name__}; expected a mapping of API key to tenant name"
            )
        for i, (key, tenant) in enumerate(keys.items(), 1):
            _check_key(key, f"keys entry #{i}")
            if not isinstance(tenant, str) or not tenant.strip():
                raise ValueError(f"keys entry #{i} maps to {tenant!r}; expected a tenant name")
        return keys

    @field_validator("tenants")
    @classmethod
    def _names_usable(cls, tenants: dict[str, TenantLimits]) -> dict[str, TenantLimits]:
        bad = [name for name in tenants if not name.strip()]
        if bad:
            raise ValueError(f"tenant name {bad[0]!r} is blank; expected a name")
        return tenants

    @classmethod
    def load(cls, path: str | Path) -> "TenantKeys":
        """Reads a JSON or YAML file; errors name the file and the entry at fault, never a key."""
        try:
            data = read_mapping(path, TENANT_KEYS_FILE, allow_empty=False)
        except ValueError as exc:
            raise ValueError(f"--tenant-keys {exc}") from None
        try:
            return cls.model_validate(data)
        except ValueError as exc:
            raise ValueError(f"--tenant-keys {path}: {exc}") from None


AUTO_BODY_BASE_BYTES, AUTO_BODY_BYTES_PER_CHAR, AUTO_BODY_MAX_BYTES = 64 << 10, 12, 4 << 20


def auto_body_limit_bytes(max_model_len: int, max_chars_per_token: int) -> int:
    """The default largest body: room for the longest text that can fit in max_model_len tokens,
    every character JSON-escaped (a character outside the BMP is 12 bytes: two \\u escapes), and
    64 KiB for the other fields (stop lists at their caps, token-id prompts, messages' roles), at
    most 4 MiB. A larger body holds nothing the server could serve, and receiving and parsing it
    costs every other client time (issue 24)."""
    text_bytes = AUTO_BODY_BYTES_PER_CHAR * max_model_len * max_chars_per_token
    return min(AUTO_BODY_MAX_BYTES, AUTO_BODY_BASE_BYTES + text_bytes)


class ServerConfig(BaseModel):
    """Everything `build_app` and `surgeplan serve` accept beyond the engine's settings."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)
    served_model_names: list[str] = Field(
        default_factory=list, description="name(s) clients use (default: --model)"
    )
    api_keys: list[SecretStr] = Field(
        default_factory=list,
        description="a key every /v1/* request must send "
        "as 'Authorization: Bearer KEY' (repeatable; also read from "
        "SURGEPLAN_API_KEY, several separated by spaces); /health and /metrics "
        "stay open",
    )
    tenant_keys: TenantKeys | None = Field(
        None,
        description="JSON or YAML file binding API keys to tenants, "
        "with per-tenant limits (kv_blocks, requests_per_s, "
        "prompt_tokens_per_s, max_concurrent); /health and /metrics stay open",
    )
    max_waiting_requests: int | None = Field(
        None, ge=0, description="past this many waiting requests, answer 503 + Retry-After"
    )
    request_timeout_s: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description="default per-request deadline in seconds (X-Request-Timeout overrides)",
    )
    max_request_body_bytes: int | None = Field(
        None,
        ge=1,
        description="largest request body, e.g. 4MiB (413 above); default (auto): what a "
        "request the model can serve needs, 64KiB + 12 bytes (a JSON-escaped character) per "
        "character of the longest text that fits in max_model_len tokens, at most 4MiB",
    )
    client_body_bytes_per_s: int = Field(
        16 << 20,
        ge=0,
        description="each client's (API key and peer address) share of request body "
        "bytes per second, each request counted as at least 256KiB (so 64 requests/s at "
        "16MiB); a client over it waits for its share, or past 2 s gets 429 + Retry-After; "
        "0: off",
    )
    max_header_bytes: int = Field(
        16 << 10,
        ge=1024,
        description="largest total of request header names and values (431 above)",
    )
    retry_after_s: int = Field(
        1,
        ge=1,
        description="seconds in the Retry-After header of a 503 or of a 429 for max_concurrent",
    )
    rate_limit_burst_s: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="seconds of its rate a "
        "tenant's token bucket holds: the burst it may send at once",
    )
    drain_timeout_s: float = Field(
        30.0,
        ge=0,
        allow_inf_nan=False,
        description="on SIGTERM or Ctrl-C, "
        "seconds in-flight requests may take to finish before they are aborted",
    )
    record_steps: int = Field(
        0,
        ge=0,
        description="keep the last N engine steps (shape, step time, busy time) "
        "for GET /debug/steps, which `surgeplan validate --via http` reads; 0: off. "
        "Behind the API key like /v1/*",
    )
    # ---- what one request or connection may cost (so one client cannot slow the others) ----
    max_stop_sequences: int = Field(
        4,
        ge=0,
        le=1024,
        description="most stop strings a request may give (OpenAI's limit is 4; 400 above)",
    )
    max_stop_sequence_chars: int = Field(
        256, ge=1, le=1 << 16, description="longest stop string, in characters (400 above)"
    )
    max_stop_token_ids: int = Field(
        256, ge=0, le=1 << 16, description="most stop_token_ids a request may give (400 above)"
    )
    max_open_tenants: int = Field(
        64,
        ge=1,
        le=1 << 16,
        description="on a server without tenant limits or "
        "tenant keys, distinct X-Tenant names served as themselves; later new names "
        "are served as 'default'",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="seconds a "
        "connection may take to send a request's headers (408 and closed after)",
    )
    body_timeout_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="seconds a client "
        "may take to send a request's body once its headers came (408 after)",
    )
    max_connections: int = Field(
        512,
        ge=1,
        le=1 << 20,
        description="open connections at once; one more is "
        "answered 503 and closed (keep it under the process's descriptor limit)",
    )
    open_keys_claim_tenants: bool = Field(
        False,
        description="let an --api-key key act, through X-Tenant, "
        "as a tenant that has its own key in --tenant-keys (otherwise 403)",
    )

    @field_validator("tenant_keys", mode="before")
    @classmethod
    def _load_file(cls, value: Any) -> Any:
        return TenantKeys.load(value) if isinstance(value, str | Path) else value

    @field_validator("api_keys")
    @classmethod
    def _keys_usable(cls, keys: list[SecretStr]) -> list[SecretStr]:
        for i, key in enumerate(keys, 1):
            _check_key(key.get_secret_value(), f"--api-key #{i}")
        return keys

    @model_validator(mode="after")
    def _keys_unique(self) -> "ServerConfig":
        bound = set(self.tenant_keys.keys) if self.tenant_keys else set()
        if any(key.get_secret_value() in bound for key in self.api_keys):
            raise ValueError(
                "an --api-key is also a key in --tenant-keys; a key is either open (any tenant) "
                "or bound to one tenant, expected each key once"
            )
        return self


@dataclass(frozen=True)
class Tenancy:
    """Each known tenant's limits, the default's filled in. `closed`: a tenant not named here is served
    as the default tenant (once limits or tenant keys exist). Otherwise X-Tenant is taken as it is, within
    bounds, since each name costs state (a metrics label, a counter): a name of up to OPEN_TENANT_CHARS
    letters, digits, '.', '_', ':' or '-', and at most `max_open` distinct names; any other is 'default'."""

    limits: dict[str, TenantLimits]
    closed: bool
    max_open: int = 64
    seen: set[str] = field(default_factory=set, compare=False)  # open names served so far

    def resolve(self, claimed: str | None) -> str:
        tenant = (claimed or "").strip() or DEFAULT_TENANT
        if self.closed:
            return tenant if tenant in self.limits else DEFAULT_TENANT
        if tenant in self.seen or tenant == DEFAULT_TENANT:
            return tenant
        if len(self.seen) >= self.max_open or not OPEN_TENANT_NAME.fullmatch(tenant):
            return DEFAULT_TENANT
        self.seen.add(tenant)
        return tenant

    def kv_quota(self) -> dict[str, int]:
        return {t: lim.kv_blocks for t, lim in self.limits.items() if lim.kv_blocks is not None}


def resolve_tenancy(
    tenant_keys: TenantKeys | None, kv_quota: dict[str, int], max_open: int = 64
) -> Tenancy:
    """Merges the tenant-keys file with `--tenant-kv-quota` (the engine's `tenant_block_quota`) and fills
    each tenant's missing limits with the default tenant's; `max_open`: see Tenancy."""
    declared = {
        t: lim.model_copy() for t, lim in (tenant_keys.tenants if tenant_keys else {}).items()
    }
    for tenant, blocks in kv_quota.items():
        limits = declared.setdefault(tenant, TenantLimits())
        if limits.kv_blocks is not None and limits.kv_blocks != blocks:
            raise ValueError(
                f"tenant {tenant!r} has kv_blocks {limits.kv_blocks} in --tenant-keys and {blocks} "
                "from --tenant-kv-quota; expected it set in one place"
            )
        limits.kv_blocks = blocks
    names = set(declared) | set(tenant_keys.keys.values() if tenant_keys else ()) | {DEFAULT_TENANT}
    default = declared.get(DEFAULT_TENANT, TenantLimits())
    for limit in LIMITS:
        setters = sorted(t for t, lim in declared.items() if getattr(lim, limit) is not None)
        if setters and getattr(default, limit) is None:
            also = " (or --tenant-kv-quota default=BLOCKS)" if limit == "kv_blocks" else ""
            raise ValueError(
                f"tenants {setters} set {limit} but the {DEFAULT_TENANT!r} tenant does not; a tenant "
                f'without its own {limit} gets the default\'s, so expected "{DEFAULT_TENANT}": '
                f'{{"{limit}": ...}} in --tenant-keys{also}'
            )
    filled = {
        t: default.model_copy(update=declared[t].model_dump(exclude_none=True))
        if t in declared
        else default.model_copy()
        for t in sorted(names)
    }
    closed = bool(tenant_keys and tenant_keys.keys) or any(
        getattr(lim, limit) is not None for lim in filled.values() for limit in LIMITS
    )
    return Tenancy(filled if closed else {}, closed, max_open)
