"""Reading Java ``.properties`` text (the subset Kafka's server.properties uses).

Supported: ``#``/``!`` comments, ``key=value``, ``key: value`` and ``key value`` separators,
backslash line continuation, and the escapes ``\\t \\n \\r \\f \\\\ \\uXXXX``. A key set twice
keeps its last value, as ``java.util.Properties`` does.
"""

from __future__ import annotations

from pathlib import Path

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            nxt = s[i + 1]
            if nxt == "u" and i + 6 <= len(s):
                try:
                    out.append(chr(int(s[i + 2 : i + 6], 16)))
                    i += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _logical_lines(text: str) -> list[str]:
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip() if pending else raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def parse_properties(text: str) -> dict[str, str]:
    props: dict[str, str] = {}
    for logical in _logical_lines(text):
        line = logical.strip()
        key_end = len(line)
        i = 0
        while i < len(line):
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=: \t":
                key_end = i
                break
            i += 1
        key = line[:key_end]
        rest = line[key_end:].lstrip(" \t")
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(" \t")
        props[_unescape(key)] = _unescape(rest)
    return props


def read_properties(path: Path) -> dict[str, str]:
    return parse_properties(path.read_text(encoding="utf-8"))
