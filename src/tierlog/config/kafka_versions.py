"""Kafka's inter-broker protocol and message format version strings, as a broker reads them.

``inter.broker.protocol.version`` and ``log.message.format.version`` name a Kafka release,
optionally with an internal version (``3.6``, ``3.6-IV2``, ``2.8``, ``0.10.2-IV0``). tierlog
speaks every protocol version it implements and always writes record format v2, so neither key
changes anything here; they are still checked, so that a typo in a copied server.properties is
reported rather than carried along unnoticed.

Kafka keeps only the leading two dot-separated parts (three for ``0.x`` releases) and looks
them up in its table of versions, so ``1.0.1`` reads as ``1.0`` and ``0.10.0.1`` as
``0.10.0``. The table below is that of Kafka 3.9, the last release with ZooKeeper mode, so a
file written for any 3.x ZooKeeper-mode broker is accepted.
"""

from __future__ import annotations

#: Release -> its internal versions (empty: the release has none and is written alone).
_RELEASES: dict[str, tuple[str, ...]] = {
    "0.8.0": (),
    "0.8.1": (),
    "0.8.2": (),
    "0.9.0": (),
    "0.10.0": ("IV0", "IV1"),
    "0.10.1": ("IV0", "IV1", "IV2"),
    "0.10.2": ("IV0",),
    "0.11.0": ("IV0", "IV1", "IV2"),
    "1.0": ("IV0",),
    "1.1": ("IV0",),
    "2.0": ("IV0", "IV1"),
    "2.1": ("IV0", "IV1", "IV2"),
    "2.2": ("IV0", "IV1"),
    "2.3": ("IV0", "IV1"),
    "2.4": ("IV0", "IV1"),
    "2.5": ("IV0",),
    "2.6": ("IV0",),
    "2.7": ("IV0", "IV1", "IV2"),
    "2.8": ("IV0", "IV1"),
    "3.0": ("IV0", "IV1"),
    "3.1": ("IV0",),
    "3.2": ("IV0",),
    "3.3": ("IV0", "IV1", "IV2", "IV3"),
    "3.4": ("IV0",),
    "3.5": ("IV0", "IV1", "IV2"),
    "3.6": ("IV0", "IV1", "IV2"),
    "3.7": ("IV0", "IV1", "IV2", "IV3", "IV4"),
    "3.8": ("IV0",),
    "3.9": ("IV0",),
}

KNOWN_VERSIONS: frozenset[str] = frozenset(
    [*_RELEASES, *(f"{r}-{iv}" for r, ivs in _RELEASES.items() for iv in ivs)]
)

#: Kafka 3.7's defaults: its latest production version, and the format 3.0 fixed.
DEFAULT_INTER_BROKER_PROTOCOL_VERSION = "3.7-IV4"
DEFAULT_MESSAGE_FORMAT_VERSION = "3.0-IV1"


def _release(text: str) -> str:
    """The release part of a version string (``3.6-IV2`` -> ``3.6``, ``1.0.1`` -> ``1.0``)."""
    base = text.split("-", 1)[0]
    parts = base.split(".")
    keep = 3 if base.startswith("0.") else 2
    return ".".join(parts[:keep])


def record_format(version: str) -> int:
    """The newest record format (message format v0, v1 or v2) a Kafka version writes: v0
    before 0.10.0, v1 through 0.10.2, v2 (record batches) from 0.11.0 on."""
    release = _release(version)
    if release in ("0.8.0", "0.8.1", "0.8.2", "0.9.0"):
        return 0
    if release in ("0.10.0", "0.10.1", "0.10.2"):
        return 1
    return 2


#: The first release that writes each record format, as Kafka names it in its errors.
FIRST_RELEASE_OF_FORMAT = {0: "0.8.0", 1: "0.10.0", 2: "0.11.0"}


def ignores_message_format(inter_broker_protocol: str) -> bool:
    """From protocol 3.0 on Kafka ignores ``log.message.format.version`` (KIP-724) and
    writes format v2 whatever it says."""
    major = int(_release(inter_broker_protocol).split(".")[0])
    return major >= 3


def kafka_version_problem(value: object) -> str | None:
    """A validator: None when ``value`` names a Kafka version, else why it does not."""
    text = str(value)
    parts = text.split(".")
    keep = 3 if text.startswith("0.") else 2
    key = ".".join(parts[:keep]) if len(parts) > keep else text
    if key in KNOWN_VERSIONS:
        return None
    return f"{text!r} is not a Kafka version (e.g. 3.7, 3.6-IV2, 2.8, 0.10.2)"
