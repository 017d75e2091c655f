"""A read whose failure is the judge's to raise: what a gate read after it could already decide.

Reading before judging reads everything first; a gate that used to return its verdict before some read
(the scope refused, dvc.lock partial, a profile without floors) never saw that read fail. The reader
keeps such a read's value or its exception, and the judge takes it where the old code read it: the same
verdict, the same error, and still no file opened while judging.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Deferred(Generic[T]):
    value: T | None = None
    error: BaseException | None = None

    def get(self) -> T:
        """The value read, or the read's own exception raised now."""
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


def deferred(read: Callable[[], T]) -> Deferred[T]:
    """Run `read` now; its exception (any: the old code raised it too) is kept for the judge."""
    try:
        return Deferred(read())
    except Exception as e:  # any: re-raised unchanged by get(), where the old code read it
        return Deferred(error=e)
