"""The error a plugin raises from ``handle``."""

from __future__ import annotations

__all__ = ["HandleError", "PermanentError", "RetryableError"]


class HandleError(Exception):
    """A failed ``handle`` call, reported to the host as the WIT ``handle-error``.

    ``retry=True`` asks the host to retry the event with backoff (something transient, e.g.
    an object the plugin needs is not in the cache yet). ``retry=False`` drops the event: use
    it for malformed objects or invalid settings, where retrying cannot help.
    """

    retry: bool = False

    def __init__(self, message: str, retry: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        if retry is not None:
            self.retry = retry

    def __str__(self) -> str:
        return self.message + (" (will retry)" if self.retry else "")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, retry={self.retry})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, HandleError)
            and other.message == self.message
            and other.retry == self.retry
        )

    __hash__ = Exception.__hash__


class PermanentError(HandleError):
    """A ``HandleError`` with ``retry=False``: the host logs it and drops the event."""

    retry = False


class RetryableError(HandleError):
    """A ``HandleError`` with ``retry=True``: the host retries the event with backoff."""

    retry = True
