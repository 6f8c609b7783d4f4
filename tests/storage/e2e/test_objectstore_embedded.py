"""The object-store plugin with its embedded default (``file://`` next to the data dir):
tiering end to end with kcat, and key rotation with ``tierlog keys rewrap``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers.kcat import consume_kcat
from tests.storage.e2e.objectstore_broker import (
    ObjectStoreBroker,
    expected_records,
    remote_objects,
    tiered_topic_configs,
)

RECORDS = 2000


def _remote_root(b: ObjectStoreBroker) -> Path:
    log_dir = Path(b.broker.log_dir)
    return log_dir.with_name(log_dir.name + "-remote")


def _ring(key_pair: Callable[[str], Any], ids: list[str], active: str) -> dict[str, str]:
    props = {
        "encryption.enabled": "true",
        "encryption.key.pair.id": active,
        "encryption.key.pairs": ",".join(ids),
    }
    for kid in ids:
        pair = key_pair(kid)
        props[f"encryption.key.pairs.{kid}.public.key.file"] = str(pair.public)
        props[f"encryption.key.pairs.{kid}.private.key.file"] = str(pair.private)
    return props


def test_embedded_file_store_tiers_and_kcat_reads_everything_back(
    os_broker_factory: Callable[..., ObjectStoreBroker],
) -> None:
    # neither the plugin nor storage.url is configured: the broker's embedded default is the
    # object-store plugin over file:// at <data dir>-remote
    b = os_broker_factory({}, default_plugin=True)
    topic = "os-embedded"
    b.create_topic(topic, 2, tiered_topic_configs())
    for p in range(2):
        b.produce(topic, p, RECORDS)
    b.wait_fully_tiered(topic, 2)

    root = _remote_root(b)
    manifests = remote_objects(root, ".rsm-manifest")
    assert len(manifests) == len(remote_objects(root, ".log")) >= 6
    for p in range(2):
        assert sum(m.parent.name == str(p) for m in manifests) >= 3
        assert consume_kcat(b.bootstrap, topic, p, timeout_s=120) == expected_records(p, RECORDS)


def test_keys_rewrap_moves_every_segment_to_the_new_key_and_the_old_key_can_go(
    tmp_path: Path,
    rsa_key_pair: Callable[[str], Any],
    os_broker_factory: Callable[[dict[str, str]], ObjectStoreBroker],
) -> None:
    b = os_broker_factory(_ring(rsa_key_pair, ["old"], "old"))
    topic = "os-rotate"
    b.create_topic(topic, 1, tiered_topic_configs())
    b.produce(topic, 0, RECORDS)
    b.wait_fully_tiered(topic, 1)
    root = _remote_root(b)
    manifests = remote_objects(root, ".rsm-manifest")
    assert len(manifests) >= 3
    data_before = {p: p.read_bytes() for p in remote_objects(root, ".log")}
    b.broker.stop()

    # rotation step 2: with "new" active and "old" still in the ring, rewrap every manifest
    rotated = _ring(rsa_key_pair, ["old", "new"], "new")
    config = tmp_path / "server.properties"
    config.write_text(
        "".join(
            f"rsm.config.{k}={v}\n"
            for k, v in {"storage.url": root.absolute().as_uri(), **rotated}.items()
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "tierlog", "keys", "rewrap", "--config", str(config)],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"re-wrapped {len(manifests)} onto 'new'" in done.stdout, done.stdout
    assert all(json.loads(m.read_bytes())["encryption"]["keyId"] == "new" for m in manifests)
    assert {p: p.read_bytes() for p in remote_objects(root, ".log")} == data_before

    # step 3: the old key is removed; every remote segment is still readable
    for k in list(b.broker.overrides):
        if k.startswith("rsm.config.encryption."):
            del b.broker.overrides[k]
    b.broker.overrides.update(
        {f"rsm.config.{k}": v for k, v in _ring(rsa_key_pair, ["new"], "new").items()}
    )
    b.broker.start()
    assert consume_kcat(b.bootstrap, topic, 0, timeout_s=120) == expected_records(0, RECORDS)
