"""Translate object-store client errors into the plugin-boundary exceptions.

The RemoteLogManager decides whether to retry from the exception type alone, so every
failure leaving the plugin is one of the ``tierlog.tiered.api`` exceptions. The error class
(throttled / server / timeout / io) feeds the metrics, which is what an operator needs to
tell "the bucket is throttling us" from "the network is down".
"""

from __future__ import annotations

import re

from obstore.exceptions import NotFoundError as _ObstoreNotFound

from tierlog.tiered.api import (
    RemoteResourceNotFoundException,
    RemoteStorageException,
    RetriableRemoteStorageException,
)


class CorruptDataError(RemoteStorageException):
    """Stored bytes failed authentication (AES-GCM tag) or decompression.

    Not retriable: reading the same object again gives the same bytes. Only the fetch that
    touched the corrupt chunk fails; other segments and partitions are unaffected.
    """


class ObjectStoreConfigError(ValueError):
    """A plugin setting is missing or invalid; the message names the key."""


class LocalReadError(RemoteStorageException):
    """Reading the local segment files failed (e.g. deleted by retention meanwhile)."""


_STATUS = re.compile(r"status code: (\d{3})")
_THROTTLE_MARKERS = ("SlowDown", "TooManyRequests", "RequestLimitExceeded", "ServerBusy")
# Markers in obstore's error text (its Debug rendering of the reqwest/hyper error chain).
_TIMEOUT_MARKERS = ("kind: Timeout", "TimedOut", "timed out", "deadline has elapsed")
_IO_MARKERS = ("kind: Connect", "ConnectionRefused", "ConnectionReset", "error sending request")


def is_not_found(exc: BaseException) -> bool:
    return isinstance(exc, _ObstoreNotFound | FileNotFoundError)


def classify(exc: BaseException) -> str:
    """One of not_found, throttled, server, timeout, io, other."""
    if is_not_found(exc):
        return "not_found"
    text = str(exc)
    if any(m in text for m in _THROTTLE_MARKERS):
        return "throttled"
    match = _STATUS.search(text)
    if match:
        status = int(match.group(1))
        if status in (429, 503):
            return "throttled"
        if status >= 500:
            return "server"
        return "other"
    if isinstance(exc, TimeoutError) or any(m in text for m in _TIMEOUT_MARKERS):
        return "timeout"
    if isinstance(exc, ConnectionError | OSError) or any(m in text for m in _IO_MARKERS):
        return "io"
    return "other"


def translate(exc: BaseException, what: str) -> RemoteStorageException:
    """Map a client error to the exception the broker acts on."""
    if isinstance(exc, RemoteStorageException):
        return exc
    error_class = classify(exc)
    message = f"{what}: {error_class}: {_first_line(exc)}"
    if error_class == "not_found":
        return RemoteResourceNotFoundException(message)
    if error_class in ("throttled", "server", "timeout", "io"):
        return RetriableRemoteStorageException(message)
    return RemoteStorageException(message)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
