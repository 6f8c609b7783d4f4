"""The configs an ``--alter`` adds and deletes, read as Kafka's ``ConfigCommand`` reads them,
and quota values printed as Java prints a ``Double`` (Kafka's output shows ``1024.0`` and
``1.048576E7``, which scripts compare as text).

``--add-config 'k1=v1,k2=[v2,v3]'`` splits on the commas outside square brackets, then each
pair on its ``=``; the brackets only group, and are dropped from the value. A pair with no
``=``, or two, is refused. ``--add-config-file`` is a Java properties file."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path

#: A comma (or an ``=`` with the spaces around it) that is not inside ``[...]``.
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"
_PAIRS = re.compile("," + _OUTSIDE_BRACKETS)
_KEY_VALUE = re.compile(r"\s*=\s*" + _OUTSIDE_BRACKETS)
_LEGAL_KEY = re.compile(r"[a-zA-Z0-9._-]*")
_MESSAGE_FORMAT = "message.format.version"


class ConfigValueError(Exception):
    """An ``--add-config`` Kafka's tool refuses, or a file it cannot read."""


def _split_dropping_trailing_empties(pattern: re.Pattern[str], text: str) -> list[str]:
    """Java's ``String.split(regex)``: trailing empty strings are dropped."""
    parts = pattern.split(text)
    while len(parts) > 1 and parts[-1] == "":
        parts.pop()
    return parts


def parse_add_config(text: str) -> dict[str, str]:
    """``k1=v1,k2=[v2,v3]`` as Kafka splits it (an empty value, ``k=``, is allowed)."""
    out: dict[str, str] = {}
    pairs = [_KEY_VALUE.split(p) for p in _split_dropping_trailing_empties(_PAIRS, text)]
    if any(len(pair) != 2 for pair in pairs):
        raise ConfigValueError(
            'Invalid entity config: all configs to be added must be in the format "key=val".'
        )
    for key, value in pairs:
        out[key.strip()] = re.sub(r"[\[\]]", "", value).strip()
    return out


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file: ``#`` / ``!`` comments, ``=`` / ``:`` / blank separators, a
    trailing backslash continuing the line, and the usual escapes."""
    out: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(line[:-1])
            continue
        logical.append(line)
        key, value = _property("".join(logical))
        out[key] = value
        logical = []
    if logical:
        key, value = _property("".join(logical))
        out[key] = value
    return out


def _property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def _unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        c = m.group(1)
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text)


def parse_to_add(add_config: str | None, add_config_file: Path | None) -> dict[str, str]:
    """The configs to add, from the file then the option (Kafka takes only one of them),
    with Kafka's key check and its warning about ``message.format.version``."""
    props: dict[str, str] = {}
    if add_config_file is not None:
        try:
            props.update(parse_properties(add_config_file.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigValueError(f"cannot read {add_config_file}: {e}") from None
    if add_config is not None:
        props.update(parse_add_config(add_config))
    if _MESSAGE_FORMAT in props:
        print(
            f"WARNING: The configuration {_MESSAGE_FORMAT}={props[_MESSAGE_FORMAT]} is "
            "specified. This configuration will be ignored if the version is newer than the "
            "inter.broker.protocol.version specified in the broker or if the "
            "inter.broker.protocol.version is 3.0 or newer. This configuration is deprecated "
            "and it will be removed in Apache Kafka 4.0.",
            file=sys.stderr,
        )
    for key in props:
        if not _LEGAL_KEY.fullmatch(key):
            raise ConfigValueError(f"Invalid character found for config key: {key}")
    return props


def parse_to_delete(delete_config: Sequence[str] | None) -> list[str]:
    """``--delete-config k1,k2`` (repeatable), each key trimmed."""
    return [k.strip() for item in delete_config or () for k in item.split(",")]


def java_double(value: float) -> str:
    """``Double.toString``: plain decimals from 10^-3 up to 10^7, ``d.dddE±n`` outside."""
    if math.isnan(value):
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    sign = "-" if value < 0 else ""
    digits_tuple = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = int(digits_tuple.exponent) + len(digits) - 1
    if 1e-3 <= abs(value) < 1e7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            fraction = digits[exponent + 1 :] or "0"
        else:
            whole, fraction = "0", "0" * (-exponent - 1) + digits
        return f"{sign}{whole}.{fraction}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def parse_java_double(key: str, text: str) -> float:
    """``String.toDouble`` as Kafka's tool applies it to a quota value."""
    candidate = text.strip()
    if candidate.endswith(("d", "D", "f", "F")):
        candidate = candidate[:-1]
    bare = candidate.lstrip("+-")
    python_only = bare.lower() in ("inf", "infinity", "nan") and bare not in ("Infinity", "NaN")
    try:
        if "_" in candidate or python_only:
            raise ValueError(candidate)
        return float(candidate)
    except ValueError:
        raise ConfigValueError(
            f"Cannot parse quota configuration value for {key}: {text}"
        ) from None
