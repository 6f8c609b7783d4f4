"""Kafka's rule tying a local retention limit to its total one, for time and for size.

The same rule holds for the broker defaults (``log.local.retention.*`` against
``log.retention.*``) and for a topic's effective config (``local.retention.*`` against
``retention.*``): while the total is limited, the local limit is either -2 (follow the total)
or an explicit limit that is not -1 (unlimited) and not above the total.
"""

from __future__ import annotations

from tierlog.config.definitions import ConfigError


def check_local_retention(
    local_key: str, local: int, total_key: str, total: int, *, total_limited: bool
) -> None:
    """Raise ``ConfigError`` on ``local_key`` when ``local`` breaks the rule against ``total``.

    ``total_limited`` says whether the total is a limit, as Kafka decides it for each kind:
    ``retention.ms != -1`` for time, ``retention.bytes > -1`` for size.
    """
    if not total_limited or local == -2:
        return
    if local == -1:
        raise ConfigError(local_key, f"Value must not be -1 as {total_key} value is set as {total}")
    if local > total:
        raise ConfigError(
            local_key, f"Value must not be more than {total_key} property value: {total}"
        )
