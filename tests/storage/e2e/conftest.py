"""Fixtures of the broker + object-store end-to-end tests.

The object-store servers and keys come from ``tests/storage/conftest.py`` (moto S3 server,
latency proxy, RSA key pairs); this file adds brokers configured with the object-store
plugin. ``encrypted_s3_broker`` is shared by a test module (broker start-up dominates);
each test uses its own topics.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from tests.helpers.broker import BrokerProcess
from tests.storage.e2e.objectstore_broker import ObjectStoreBroker, broker_overrides

S3_KEY = "testing"


def make_bucket(endpoint: str) -> tuple[Any, str]:
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=S3_KEY,
        aws_secret_access_key=S3_KEY,
        region_name="us-east-1",
    )
    name = f"e2e-{uuid.uuid4().hex[:16]}"
    client.create_bucket(Bucket=name)
    return client, name


def s3_rsm_props(endpoint: str, bucket: str) -> dict[str, str]:
    return {
        "storage.url": f"s3://{bucket}/tiered",
        "storage.s3.endpoint.url": endpoint,
        "storage.s3.region": "us-east-1",
        "storage.s3.path.style.access.enabled": "true",
        "storage.aws.access.key.id": S3_KEY,
        "storage.aws.secret.access.key": S3_KEY,
        "storage.retry.max": "1",
        "storage.retry.timeout.ms": "3000",
        "storage.request.timeout.ms": "5000",
    }


def encryption_and_compression(public: Path, private: Path) -> dict[str, str]:
    return {
        "compression.enabled": "true",
        "encryption.enabled": "true",
        "encryption.key.pair.id": "k1",
        "encryption.key.pairs": "k1",
        "encryption.key.pairs.k1.public.key.file": str(public),
        "encryption.key.pairs.k1.private.key.file": str(private),
        "chunk.size": str(16 * 1024),
    }


@pytest.fixture(scope="module")
def encrypted_s3(
    tmp_path_factory: pytest.TempPathFactory,
    moto_s3: Any,
    rsa_key_pair: Callable[[str], Any],
) -> Iterator[tuple[ObjectStoreBroker, Any, str]]:
    """(broker, boto3 client, bucket): a broker tiering to a fresh bucket on the session's
    moto server with zstd compression and AES-GCM encryption (RSA key ring) on."""
    client, bucket = make_bucket(moto_s3.endpoint)
    pair = rsa_key_pair("e2e")
    props = s3_rsm_props(moto_s3.endpoint, bucket) | encryption_and_compression(
        pair.public, pair.private
    )
    b = BrokerProcess(tmp_path_factory.mktemp("os-broker"), broker_overrides(props))
    b.start()
    yield ObjectStoreBroker(b), client, bucket
    b.close()


@pytest.fixture
def os_broker_factory(tmp_path: Path) -> Iterator[Callable[..., ObjectStoreBroker]]:
    """``factory(rsm_props, default_plugin=False)``: brokers with the given ``rsm.config``
    props and the object-store plugin (named, or the broker's default when
    ``default_plugin``); killed at teardown."""
    made: list[BrokerProcess] = []

    def make(rsm_props: dict[str, str], *, default_plugin: bool = False) -> ObjectStoreBroker:
        overrides = broker_overrides(rsm_props)
        if default_plugin:  # leave the storage plugin to the broker's default
            del overrides["remote.log.storage.manager.class.name"]
        b = BrokerProcess(tmp_path / f"broker{len(made)}", overrides)
        made.append(b)
        b.start()
        return ObjectStoreBroker(b)

    yield make
    for b in made:
        b.close()
