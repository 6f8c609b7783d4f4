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

Servers are polled for readiness with a deadline; nothing sleeps for synchronisation.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
TOOLS = ROOT / ".tools"
AZURITE_ACCOUNT = "devstoreaccount1"
# Azurite's well-known development account key (public, documented by Microsoft).
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
S3_ACCESS_KEY = "testing"
S3_SECRET_KEY = "testing"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}")


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except urllib.error.HTTPError:
        return True  # the server answered
    except OSError:
        return False


@dataclass
class ServerProcess:
    endpoint: str
    port: int
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def start_moto(port: int | None = None) -> ServerProcess:
    port = port or free_port()
    proc = subprocess.Popen(
        [str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _http_ok(endpoint + "/moto-api/"), 30, "moto_server")
    except TimeoutError:
        proc.kill()
        raise
    return ServerProcess(endpoint, port, proc)


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[ServerProcess]:
    server = start_moto()
    yield server
    server.stop()


def boto_client(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=S3_ACCESS_KEY,
        aws_secret_access_key=S3_SECRET_KEY,
        region_name="us-east-1",
    )


def s3_props(endpoint: str, bucket: str, prefix: str = "tiered") -> dict[str, str]:
    return {
        "storage.url": f"s3://{bucket}/{prefix}",
        "storage.s3.endpoint.url": endpoint,
        "storage.s3.region": "us-east-1",
        "storage.s3.path.style.access.enabled": "true",
        "storage.aws.access.key.id": S3_ACCESS_KEY,
        "storage.aws.secret.access.key": S3_SECRET_KEY,
        "storage.retry.max": "2",
        "storage.retry.timeout.ms": "5000",
    }


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


def _load_bench_module(name: str) -> ModuleType:
    path = ROOT / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"tierlog_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


latency_proxy_module = _load_bench_module("latency_proxy")


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


def _azurite_main() -> Path:
    main = TOOLS / "node_modules" / "azurite" / "dist" / "src" / "blob" / "main.js"
    if not main.exists():
        npm = shutil.which("npm")
        if npm is None:
            raise RuntimeError("Azurite needs Node.js and npm (not found on PATH)")
        TOOLS.mkdir(exist_ok=True)
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(TOOLS), "azurite"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return main


@pytest.fixture(scope="session")
def azurite_blob(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("Azurite needs Node.js (node not found on PATH)")
    main = _azurite_main()
    port = free_port()
    location = tmp_path_factory.mktemp("azurite")
    proc = subprocess.Popen(
        [
            node,
            str(main),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--location",
            str(location),
            "--silent",
            "--skipApiVersionCheck",
            "--loose",
            "--disableTelemetry",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
    try:
        wait_until(lambda: _http_ok(endpoint + "?comp=list"), 60, "azurite")
    except TimeoutError:
        proc.kill()
        raise
    server = ServerProcess(endpoint, port, proc)
    yield server
    server.stop()


def create_azure_container(endpoint: str, name: str) -> None:
    """Create a container with a SharedKey-signed REST call (no Azure SDK needed)."""
    date = datetime.datetime.now(datetime.UTC).strftime("%a, %d %b %Y %H:%M:%S GMT")
    version = "2021-10-04"
    content_type = "application/octet-stream"
    string_to_sign = (
        "PUT\n\n\n\n\n" + content_type + "\n\n\n\n\n\n\n"
        f"x-ms-date:{date}\nx-ms-version:{version}\n"
        f"/{AZURITE_ACCOUNT}/{AZURITE_ACCOUNT}/{name}\nrestype:container"
    )
    signature = base64.b64encode(
        hmac.new(base64.b64decode(AZURITE_KEY), string_to_sign.encode(), hashlib.sha256).digest()
    ).decode()
    request = urllib.request.Request(
        f"{endpoint}/{name}?restype=container",
        method="PUT",
        data=b"",
        headers={
            "Content-Type": content_type,
            "x-ms-date": date,
            "x-ms-version": version,
            "Authorization": f"SharedKey {AZURITE_ACCOUNT}:{signature}",
        },
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 201


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


@dataclass(frozen=True)
class KeyPairPaths:
    public: Path
    private: Path


def write_rsa_key_pair(directory: Path, name: str) -> KeyPairPaths:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = directory / f"{name}-private.pem"
    public = directory / f"{name}-public.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    os.chmod(private, 0o600)
    return KeyPairPaths(public, private)


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
