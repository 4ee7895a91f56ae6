"""Who may call the API, and as which tenant.

When keys are configured, every /v1/* request needs `Authorization: Bearer KEY` (401 otherwise);
/health and /metrics stay open, as in vLLM. A key from `--tenant-keys` decides the tenant, and an
X-Tenant header naming another one is refused (403); an `--api-key` key, or no keys at all, leaves the
tenant to X-Tenant, except that an open key may not act as a tenant that has its own key (403, unless
`open_keys_claim_tenants`). /debug/* sits behind the key like /v1/*. Headers over a size limit are
refused (431) before anything reads them (the HTTP parser bounds what it buffers, see http_guard.py).

Keys are held only as SHA-256 digests, and a presented key is compared with every one of them in
constant time, so the answer's timing tells nothing about which key, or how much of one, matched.
Neither configured nor presented keys are ever logged or echoed.
"""

import hashlib
import hmac

from engine.metrics import ServingMetrics
from engine.openai.middleware import refuse
from engine.openai.server_config import ServerConfig, Tenancy

GUARDED_PREFIXES = ("/v1", "/debug")
TENANT_HEADER = b"x-tenant"


def _digest(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()


class KeyRing:
    """Digests of the accepted keys, each with its tenant (None: an open key, the header names the tenant)."""

    def __init__(self, open_keys: list[str], tenant_keys: dict[str, str]):
        self._entries = [(_digest(k.encode()), None) for k in open_keys]
        self._entries += [(_digest(k.encode()), tenant) for k, tenant in tenant_keys.items()]
        self.keyed_tenants = frozenset(tenant_keys.values())

    @classmethod
    def of(cls, config: ServerConfig) -> "KeyRing":
        return cls(
            [k.get_secret_value() for k in config.api_keys],
            dict(config.tenant_keys.keys) if config.tenant_keys else {},
        )

    @property
    def enabled(self) -> bool:
        return bool(self._entries)

    def lookup(self, presented: bytes) -> tuple[bool, str | None, str]:
        """(whether the key is accepted, its tenant or None, its id: the key's place in the ring,
        which names the client in per-client budgets without keeping the key)."""
        digest, found, tenant, key_id = _digest(presented), False, None, ""
        for i, (known, known_tenant) in enumerate(self._entries):  # no early exit: same time
            match = hmac.compare_digest(known, digest)
            found |= match
            tenant = known_tenant if match else tenant
            key_id = f"key#{i}" if match else key_id
        return found, tenant, key_id


class AccessMiddleware:
    """Checks header size, then the key on /v1/*, and leaves the tenant in `request.state.tenant`."""

    def __init__(
        self,
        app,
        keys: KeyRing,
        tenancy: Tenancy,
        metrics: ServingMetrics,
        max_header_bytes: int,
        open_keys_claim_tenants: bool = False,
    ):
        self.app, self.keys, self.tenancy, self.metrics = app, keys, tenancy, metrics
        self.max_header_bytes, self.open_keys_claim_tenants = (
            max_header_bytes,
            open_keys_claim_tenants,
        )

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        size = sum(len(name) + len(value) for name, value in scope["headers"])
        if size > self.max_header_bytes:
            return await self._refuse(
                send,
                431,
                "header_too_large",
                f"the request headers have {size} bytes, over "
                f"the limit of {self.max_header_bytes} (--max-header-bytes)",
            )
        claimed = _header(scope, TENANT_HEADER)
        tenant, key_id = None, ""
        guarded = self.keys.enabled and _guarded(scope["path"])
        if guarded:
            problem, tenant, key_id = self._authenticate(_header(scope, b"authorization"))
            if problem is not None:
                return await self._refuse(
                    send, 401, "unauthorized", problem, {"WWW-Authenticate": "Bearer"}
                )
        claimed_name = (claimed or "").strip()
        if tenant is not None and claimed_name and claimed_name != tenant:
            return await self._refuse(
                send,
                403,
                "forbidden",
                f"the API key belongs to tenant {tenant!r} but "
                f"X-Tenant names {_short(claimed)}; expected no X-Tenant header or {tenant!r}",
            )
        if (
            guarded
            and tenant is None
            and claimed_name in self.keys.keyed_tenants
            and not self.open_keys_claim_tenants
        ):
            return await self._refuse(
                send,
                403,
                "forbidden",
                f"X-Tenant names {_short(claimed_name)}, a tenant "
                "with its own key; expected that tenant's key, or another X-Tenant with "
                "this key (--open-keys-claim-tenants allows it)",
            )
        state = scope.setdefault("state", {})
        state["tenant"], state["key_id"] = tenant or self.tenancy.resolve(claimed), key_id
        await self.app(scope, receive, send)

    def _authenticate(self, authorization: str | None) -> tuple[str | None, str | None, str]:
        """(problem or None, the key's tenant or None, the key's id)."""
        if authorization is None:
            return (
                "no API key was sent; expected the header 'Authorization: Bearer <key>'",
                None,
                "",
            )
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return "the Authorization header is not of the form 'Bearer <key>'", None, ""
        found, tenant, key_id = self.keys.lookup(token.strip().encode("latin-1"))
        if not found:
            return (
                "the API key is not valid; expected a key given to the server by --api-key or "
                "--tenant-keys",
                None,
                "",
            )
        return None, tenant, key_id

    async def _refuse(
        self, send, status: int, reason: str, message: str, headers: dict | None = None
    ) -> None:
        self.metrics.observe_rejected(reason)
        await refuse(send, status, message, headers)


def _guarded(path: str) -> bool:
    return any(path == prefix or path.startswith(prefix + "/") for prefix in GUARDED_PREFIXES)


def _header(scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def _short(text: str) -> str:
    return repr(text) if len(text) <= 64 else repr(text[:61] + "...")
