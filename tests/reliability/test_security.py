"""Scenario 7: security basics against a real broker (and a moto S3 server).

* Topic names cannot escape the data directory or the bucket prefix: traversal, separators,
  NUL, odd Unicode and over-long names are refused by CreateTopics and by Metadata with
  auto-creation, and nothing appears on disk; legal but odd names stay inside both.
* With encryption on, objects in the bucket do not contain the plaintext, and a broker
  without the private key cannot serve them (a precise error, not garbage).
* Secrets (S3 secret key, anything under ``rsm.config.``/``rlmm.config.`` that looks like a
  password or key) appear neither in the broker's logs, nor in DescribeConfigs (sensitive,
  value null, as in Kafka), nor in the metrics.
"""

from __future__ import annotations

import os
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

from tests.helpers.broker import BrokerProcess
from tests.helpers.object_stores import write_rsa_key_pair
from tests.helpers.poll import wait_until
from tests.reliability.rel_helpers import (
    FAST_START,
    create_topic,
    index_of,
    must_create_topic,
    produce_values,
    record,
    wire_fetch,
    wire_produce,
)
from tests.reliability.s3_env import Bucket, ServerProcess, tiered_overrides, tiered_topic_configs
from tierlog.client import WireConnection
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.errors import ErrorCode

HOSTILE_NAMES = [
    "..",
    ".",
    "../escape",
    "../../etc/passwd",
    "a/b",
    "/abs",
    "a\\b",
    "nul\x00byte",
    "",
    " ",
    "tab\there",
    "new\nline",
    "caf\u00e9",
    "\u202eevil",  # right-to-left override
    "\uff0e\uff0e",  # fullwidth dots
    "\u2024\u2024",  # one-dot leaders
    "a" * 250,
    "x" * 249 + "/",
    "%2e%2e",
    "emoji\U0001f4a5",
]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _metadata_auto_create(b: BrokerProcess, name: str) -> int:
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        md = c.call(ApiKey.METADATA, 12, topics=[{"name": name}], allow_auto_topic_creation=True)
    return int(md.topics[0].error_code)


def test_topic_names_cannot_escape_the_data_dir(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory({**FAST_START, "auto.create.topics.enable": "true"})
    must_create_topic(b.bootstrap, "canary")
    root = b.base_dir.parent  # every broker dir of this test lives below it
    before = _tree(root)
    refused = 0
    for name in HOSTILE_NAMES:
        code, msg = create_topic(b.bootstrap, name)
        assert code == ErrorCode.INVALID_TOPIC_EXCEPTION, (name, ErrorCode(code), msg)
        assert _metadata_auto_create(b, name) == ErrorCode.INVALID_TOPIC_EXCEPTION, name
        with WireConnection.to_bootstrap(b.bootstrap) as c:
            err, _, _ = wire_produce(c, name, [b"x"])
        assert err != 0, name
        refused += 3
    after = _tree(root)
    new = {p for p in after - before if not p.endswith(("broker.stderr", "broker.stdout"))}
    # checkpoint rewrites only; no directory or file named after a hostile topic
    assert all(Path(p).parent == Path(b.base_dir.name, "data") for p in new), new
    assert all("-0" not in Path(p).name for p in new), new
    assert b.running and "Traceback" not in b.stderr, b.stderr[-3000:]
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        assert wire_produce(c, "canary", [b"still fine"])[0] == 0
    record("security.topic_names", injections=refused, names=len(HOSTILE_NAMES), accepted=0)


def test_legal_odd_names_stay_inside_data_dir_and_bucket_prefix(
    broker_factory: Callable[..., BrokerProcess], moto: ServerProcess
) -> None:
    """Kafka allows names made only of dots and dashes (except "." and ".."): their local
    directories and remote keys must stay where they belong."""
    bucket = Bucket.create(moto.endpoint, prefix="tenant-a/tiered")
    b = broker_factory(tiered_overrides(bucket))
    names = ["...", "-..-", "_", "a..b", "-" * 200]
    for n in names:
        must_create_topic(b.bootstrap, n, 1, tiered_topic_configs())
        produce_values(b.bootstrap, n, range(1500), pad=200)
    data = b.log_dir.resolve()
    for n in names:
        d = (b.log_dir / f"{n}-0").resolve()
        assert d.parent == data and d.is_dir(), d
    wait_until(
        lambda: all(any(f"/{n}-" in k for k in bucket.object_keys()) for n in names),
        60,
        interval_s=0.3,
        what="uploads of every odd-named topic",
    )
    keys = bucket.object_keys()
    assert keys and all(k.startswith("tenant-a/tiered/") for k in keys), keys[:5]
    for k in keys:
        parts = k.split("/")
        assert ".." not in parts and "." not in parts and "" not in parts, k
    record("security.odd_legal_names", topics=len(names), objects=len(keys), outside_prefix=0)


# ---- encryption ---------------------------------------------------------------------------
def test_remote_objects_unreadable_without_the_key_ring(
    broker_factory: Callable[..., BrokerProcess], moto: ServerProcess, tmp_path: Path
) -> None:
    keys = write_rsa_key_pair(tmp_path, "k1")
    bucket = Bucket.create(moto.endpoint)
    enc = {
        "encryption_enabled": "true",
        "encryption_key_pair_id": "k1",
        "encryption_key_pairs": "k1",
        "encryption_key_pairs_k1_public_key_file": str(keys.public),
        "compression_enabled": "false",  # what hides the plaintext must be the encryption
    }
    private = {"encryption_key_pairs_k1_private_key_file": str(keys.private)}
    b = broker_factory(tiered_overrides(bucket, **enc, **private))
    must_create_topic(b.bootstrap, "secret-data", 1, tiered_topic_configs())
    n = 2000
    produce_values(b.bootstrap, "secret-data", range(n), pad=200)
    wait_until(
        lambda: not os.path.exists(b.log_dir / "secret-data-0" / "00000000000000000000.log"),
        60,
        interval_s=0.3,
        what="the first segment to be uploaded and leave the local tier",
    )
    # the broker with the key ring reads its cold data back
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        err, recs = wire_fetch(c, "secret-data", 0)
    assert err == 0 and recs and recs[0][1] is not None and index_of(recs[0][1]) == 0
    # nothing in the bucket contains the plaintext
    stored = bucket.object_keys()
    assert any(k.endswith(".log") for k in stored)
    for k in stored:
        body = bucket.get(k)
        assert b"v000000" not in body and b"........" not in body, k
    # the same data, a broker without the private key: a clear error for that fetch
    b.stop()
    del b.overrides["rsm.config.encryption.key.pairs.k1.private.key.file"]
    b.start()
    t0 = time.monotonic()
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        err, recs = wire_fetch(c, "secret-data", 0)
    elapsed = time.monotonic() - t0
    assert err != 0 and not recs, (ErrorCode(err), recs[:1])
    assert elapsed < 10
    record(
        "security.encryption",
        objects=len(stored),
        plaintext_found=0,
        fetch_without_key=ErrorCode(err).name,
        fetch_without_key_s=round(elapsed, 3),
    )


# ---- secrets ------------------------------------------------------------------------------
def test_secrets_never_appear_in_logs_describe_configs_or_metrics(
    broker_factory: Callable[..., BrokerProcess], moto: ServerProcess, tmp_path: Path
) -> None:
    secret = f"S3cr3t-{uuid.uuid4().hex}"
    password = f"Pa55-{uuid.uuid4().hex}"
    keys = write_rsa_key_pair(tmp_path, "k9")
    bucket = Bucket.create(moto.endpoint)
    overrides = tiered_overrides(
        bucket,
        storage_aws_secret_access_key=secret,
        encryption_enabled="true",
        encryption_key_pair_id="k9",
        encryption_key_pairs="k9",
        encryption_key_pairs_k9_public_key_file=str(keys.public),
        encryption_key_pairs_k9_private_key_file=str(keys.private),
    )
    overrides["rlmm.config.some.password"] = password
    b = broker_factory(overrides)
    must_create_topic(b.bootstrap, "s", 1, tiered_topic_configs())
    produce_values(b.bootstrap, "s", range(1500), pad=200)
    wait_until(bucket.object_keys, 60, interval_s=0.3, what="an upload")
    with WireConnection.to_bootstrap(b.bootstrap) as c:
        r = c.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[{"resource_type": 4, "resource_name": "0", "configuration_keys": None}],
            include_synonyms=True,
            include_documentation=False,
        )
    res = r.results[0]
    assert int(res.error_code) == 0
    entries = {e.name: e for e in res.configs}
    hidden = [
        "rsm.config.storage.aws.secret.access.key",
        "rsm.config.encryption.key.pairs.k9.private.key.file",
        "rlmm.config.some.password",
    ]
    for name in hidden:
        assert name in entries, sorted(k for k in entries if "config." in k)
        e = entries[name]
        assert e.is_sensitive and e.value is None, (name, e)
        assert all(s.value is None for s in e.synonyms or []), (name, e.synonyms)
    dumped = repr(res)
    with urllib.request.urlopen(b.metrics_url + "/metrics", timeout=10) as m:
        metrics_text = m.read().decode()
    # an error path that reports the configuration: a broker whose plugin config is bad
    bad = broker_factory({**overrides, "rsm.config.storage.url": "nosuchscheme://x"}, start=False)
    try:
        bad.start(timeout_s=30)
        started = True
    except Exception:
        started = False
    texts = {
        "stderr": b.stderr + b.stdout,
        "describe": dumped,
        "metrics": metrics_text,
        "bad-start": bad.stderr + bad.stdout,
    }
    for where, text in texts.items():
        for s in (secret, password, str(keys.private)):
            assert s not in text, f"{s!r} leaked into {where}"
    assert not started, "a broker with an unusable storage.url started"
    record(
        "security.secrets",
        secrets_checked=3,
        places=list(texts),
        leaks=0,
    )
