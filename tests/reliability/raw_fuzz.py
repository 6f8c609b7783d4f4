"""A raw-socket fuzzer of the Kafka wire protocol, usable in-process or as a subprocess.

Frames are generated from a seeded ``random.Random`` so a failing run can be replayed from
its seed. Kinds, for one (api key, version):

* ``random``: a valid request header followed by random bytes;
* ``truncated``: a valid (default-valued) request cut at a random point, size fixed up;
* ``flipped``: a valid request with one bit flipped (not for the admin APIs whose random
  but valid requests could create thousands of partitions);
* ``lying``: a size prefix larger than what is sent, then the peer closes;
* ``garbage``: random bytes with no valid header at all.

As a subprocess (``python raw_fuzz.py HOST PORT RATE SECONDS SEED``) it sends about RATE
frames a second on fresh connections until SECONDS have passed, never reading replies: the
background attack of the throughput test.
"""

from __future__ import annotations

import random
import socket
import struct
import sys
import time
from collections.abc import Iterator

from tierlog.protocol.builder import mk
from tierlog.protocol.codec import encode_request, request_schema
from tierlog.protocol.versions import ADVERTISED

API_VERSIONS = [(k, v) for k, (lo, hi) in sorted(ADVERTISED.items()) for v in range(lo, hi + 1)]
KINDS = ("random", "truncated", "flipped", "lying", "garbage")
#: CreateTopics and CreatePartitions: a flipped count could be a valid huge request.
NO_FLIPS = {19, 37}


def header(api_key: int, version: int, corr: int) -> bytes:
    cls = request_schema(api_key, version)
    assert cls is not None
    flexible = cls.__header_schema__.__version__ >= 2
    return struct.pack(">hhih", api_key, version, corr, 4) + b"fuzz" + (b"\0" if flexible else b"")


def valid_request(api_key: int, version: int, corr: int = 1) -> bytes:
    cls = request_schema(api_key, version)
    assert cls is not None
    return bytes(encode_request(api_key, version, corr, "fuzz", mk(cls)))


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def make_frame(rng: random.Random, api_key: int, version: int, kind: str) -> bytes:
    if kind == "random":
        return framed(
            header(api_key, version, rng.randrange(2**31)) + rng.randbytes(rng.randrange(0, 300))
        )
    if kind == "truncated":
        payload = valid_request(api_key, version)[4:]
        return framed(payload[: rng.randrange(0, len(payload) + 1)])
    if kind == "flipped" and api_key not in NO_FLIPS:
        flipped = bytearray(valid_request(api_key, version)[4:])
        pos = rng.randrange(len(flipped))
        flipped[pos] ^= 1 << rng.randrange(8)
        return framed(bytes(flipped))
    if kind == "lying":
        body = header(api_key, version, 1) + rng.randbytes(rng.randrange(0, 64))
        return struct.pack(">i", len(body) + rng.randrange(1, 4096)) + body
    return rng.randbytes(rng.randrange(1, 200))


def frames(rng: random.Random, per_api_version: int) -> Iterator[tuple[int, int, str, bytes]]:
    """``per_api_version`` frames of every kind for every advertised (api, version)."""
    for api_key, version in API_VERSIONS:
        for kind in KINDS:
            for _ in range(per_api_version):
                yield api_key, version, kind, make_frame(rng, api_key, version, kind)


def send_and_close(host_port: tuple[str, int], data: bytes, linger_s: float = 0.0) -> None:
    """One connection: send, optionally wait a little for the broker to react, close."""
    try:
        with socket.create_connection(host_port, timeout=5) as s:
            s.sendall(data)
            if linger_s:
                s.settimeout(linger_s)
                try:
                    s.recv(65536)
                except (TimeoutError, OSError):
                    pass
    except (ConnectionResetError, BrokenPipeError):
        pass


def run_background(host: str, port: int, rate: float, seconds: float, seed: int) -> int:
    rng = random.Random(seed)
    sent = 0
    start = time.monotonic()
    while (now := time.monotonic()) - start < seconds:
        due = start + sent / rate
        if now < due:
            time.sleep(min(due - now, 0.05))  # pacing the attack, not synchronisation
            continue
        api_key, version = rng.choice(API_VERSIONS)
        send_and_close((host, port), make_frame(rng, api_key, version, rng.choice(KINDS)))
        sent += 1
    return sent


if __name__ == "__main__":
    h, p, r, s, seed = sys.argv[1:6]
    n = run_background(h, int(p), float(r), float(s), int(seed))
    print(f"sent {n}", flush=True)
