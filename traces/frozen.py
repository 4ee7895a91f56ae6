"""A read-only list: compares equal to plain lists (callers expect lists) but cannot be changed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NoReturn


class FrozenList(list):
    """A `list` whose mutating methods raise, so a `Trace` can hand out its hash ids safely."""

    __slots__ = ()

    def _refuse(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        raise TypeError(
            "trace hash ids are read-only; build a new Trace with Trace.replace(hash_ids=...)"
        )

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _refuse  # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))


def freeze_hash_ids(hash_ids: Iterable[Sequence[int]]) -> FrozenList:
    """One FrozenList of ints per request, inside one outer FrozenList."""
    return FrozenList(
        ids if isinstance(ids, FrozenList) else FrozenList(int(i) for i in ids) for ids in hash_ids
    )
