"""Object stores and keys for the storage tests, and for the suites that reuse them
(reliability, Spark): moto S3 and Azurite servers as subprocesses on free ports, S3 clients
and plugin props, ``bench/latency_proxy.py`` loaded as a module, RSA key pairs in PEM files.
The fixtures around them are in ``tests/storage/conftest.py``. Servers are polled for
readiness with a deadline; nothing sleeps for synchronisation.
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
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.helpers import poll

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
    """``poll.wait_until``, failing with ``TimeoutError`` (callers stop a server on it)."""
    try:
        poll.wait_until(predicate, timeout, interval_s=0.05, what=what)
    except AssertionError as e:
        raise TimeoutError(str(e)) from e


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


def _once_answering(server: ServerProcess, probe: str, timeout: float, what: str) -> ServerProcess:
    """``server`` once HTTP requests to its endpoint + ``probe`` are answered; killed if
    they are not within ``timeout`` seconds."""
    try:
        wait_until(lambda: _http_ok(server.endpoint + probe), timeout, what)
    except TimeoutError:
        server.process.kill()
        raise
    return server


def start_moto(port: int | None = None) -> ServerProcess:
    port = port or free_port()
    proc = subprocess.Popen(
        [str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    return _once_answering(ServerProcess(endpoint, port, proc), "/moto-api/", 30, "moto_server")


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


def _load_bench_module(name: str) -> ModuleType:
    path = ROOT / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"tierlog_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


latency_proxy_module = _load_bench_module("latency_proxy")


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


def start_azurite(location: Path) -> ServerProcess:
    """The Azurite blob emulator storing under ``location``, on a free port."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("Azurite needs Node.js (node not found on PATH)")
    main = _azurite_main()
    port = free_port()
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
    return _once_answering(ServerProcess(endpoint, port, proc), "?comp=list", 60, "azurite")


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
