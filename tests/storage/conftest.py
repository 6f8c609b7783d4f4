"""Fixtures for storage-plugin tests: real object-store servers on free ports.

* ``moto_s3``: a moto S3 server (``moto_server``) started as a subprocess for the session;
  ``s3_bucket`` creates a fresh bucket per test and returns the plugin props for it.
* ``azurite_blob``: the Azurite blob emulator (Node) started as a subprocess for the
  session; ``azure_container`` creates a fresh container per test. Azurite is taken from
  ``.tools/node_modules`` (installed with ``npm install --prefix .tools azurite``; the
  fixture runs that itself when it is missing).
* ``latency_proxy``: ``bench/latency_proxy.py`` in front of the moto server, for request
  counting and fault injection (503 SlowDown, resets, stalls).
* ``rsa_key_pair``: writes a fresh RSA-2048 key pair (PEM) and returns the file paths.

The servers and key files themselves come from ``tests/helpers/object_stores.py``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.helpers.object_stores import (
    AZURITE_ACCOUNT,
    AZURITE_KEY,
    KeyPairPaths,
    ServerProcess,
    boto_client,
    create_azure_container,
    latency_proxy_module,
    s3_props,
    start_azurite,
    start_moto,
    write_rsa_key_pair,
)


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[ServerProcess]:
    server = start_moto()
    yield server
    server.stop()


@pytest.fixture
def moto_factory() -> Iterator[Callable[..., ServerProcess]]:
    """Start dedicated moto servers (``factory(port=None)``), e.g. to kill one mid-test;
    all are stopped at teardown."""
    started: list[ServerProcess] = []

    def start(port: int | None = None) -> ServerProcess:
        server = start_moto(port)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def s3_bucket_on() -> Callable[..., dict[str, str]]:
    """``factory(server_endpoint, bucket=None, via=None)``: create the bucket on that server
    (a fresh name unless given) and return plugin props, pointing at ``via`` (e.g. a
    proxy) when given."""

    def make(endpoint: str, bucket: str | None = None, via: str | None = None) -> dict[str, str]:
        name = bucket or f"b-{uuid.uuid4().hex[:20]}"
        boto_client(endpoint).create_bucket(Bucket=name)
        return s3_props(via or endpoint, name)

    return make


@pytest.fixture
def s3_admin(moto_s3: ServerProcess) -> Any:
    """A boto3 S3 client on the moto server, to inspect or tamper with what is stored."""
    return boto_client(moto_s3.endpoint)


@pytest.fixture
def s3_props_for(moto_s3: ServerProcess) -> Callable[[str, str], dict[str, str]]:
    """Plugin props for (bucket, prefix) on the moto server."""
    return lambda bucket, prefix: s3_props(moto_s3.endpoint, bucket, prefix)


@pytest.fixture
def s3_bucket(moto_s3: ServerProcess) -> dict[str, str]:
    bucket = f"b-{uuid.uuid4().hex[:20]}"
    boto_client(moto_s3.endpoint).create_bucket(Bucket=bucket)
    return s3_props(moto_s3.endpoint, bucket)


@pytest.fixture
def proxy_fault() -> type:
    """The ``Fault`` class of the latency proxy (``Fault("503", count=2, method="PUT")``)."""
    return latency_proxy_module.Fault  # type: ignore[no-any-return]


@pytest.fixture
def proxy_factory() -> Iterator[Callable[..., Any]]:
    """``factory(upstream_port, latency_s=0.0)``: started proxies, stopped at teardown."""
    started: list[Any] = []

    def make(upstream_port: int, latency_s: float = 0.0) -> Any:
        proxy = latency_proxy_module.LatencyProxy("127.0.0.1", upstream_port, latency_s=latency_s)
        proxy.start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()


@pytest.fixture
def latency_proxy(moto_s3: ServerProcess) -> Iterator[object]:
    """A zero-latency proxy in front of moto (tests set latency/faults as they need)."""
    proxy = latency_proxy_module.LatencyProxy("127.0.0.1", moto_s3.port, latency_s=0.0)
    proxy.start()
    yield proxy
    proxy.stop()


@pytest.fixture(scope="session")
def azurite_blob(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    server = start_azurite(tmp_path_factory.mktemp("azurite"))
    yield server
    server.stop()


@pytest.fixture
def azure_container(azurite_blob: ServerProcess) -> dict[str, str]:
    name = f"c{uuid.uuid4().hex[:20]}"
    create_azure_container(azurite_blob.endpoint, name)
    return {
        "storage.url": f"az://{name}/tiered",
        "storage.azure.account.name": AZURITE_ACCOUNT,
        "storage.azure.account.key": AZURITE_KEY,
        "storage.azure.endpoint.url": azurite_blob.endpoint,
        "storage.retry.max": "2",
        "storage.retry.timeout.ms": "5000",
    }


@pytest.fixture(scope="session")
def rsa_key_pair(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], KeyPairPaths]:
    """A factory of key pairs by id, cached for the session (RSA generation is slow)."""
    directory = tmp_path_factory.mktemp("keys")
    made: dict[str, KeyPairPaths] = {}

    def make(name: str) -> KeyPairPaths:
        if name not in made:
            made[name] = write_rsa_key_pair(directory, name)
        return made[name]

    return make
