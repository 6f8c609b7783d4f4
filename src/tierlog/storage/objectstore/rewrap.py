"""``tierlog keys rewrap``: re-wrap the data keys of existing segments onto the active key.

Rotation in three steps: add the new key pair to the ring and make it active (new segments
use it at once), run this tool so every existing manifest's data key is wrapped by the new
key, then remove the old key. Only manifests are rewritten (a few KiB each); segment data
and indexes are untouched because the data key itself does not change.

A manifest whose ``.log`` disappears while it is being rewritten (the broker deleted the
segment meanwhile) is removed again, so the tool never resurrects a deleted segment.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tierlog.storage.objectstore.backend import ObjectBackend
from tierlog.storage.objectstore.config import ObjectStoreConfig
from tierlog.storage.objectstore.keyring import WRAP_ALGORITHM, KeyRing
from tierlog.storage.objectstore.layout import LOG_SUFFIX, MANIFEST_SUFFIX
from tierlog.storage.objectstore.manifest import EncryptionInfo, ManifestError, SegmentManifest
from tierlog.tiered.api import RemoteResourceNotFoundException, RemoteStorageException


@dataclass
class RewrapReport:
    scanned: int = 0
    rewrapped: int = 0
    already_active: int = 0
    unencrypted: int = 0
    vanished: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)


def rewrap_manifests(
    backend: ObjectBackend,
    keyring: KeyRing,
    prefix: str,
    *,
    dry_run: bool = False,
    concurrency: int = 8,
) -> RewrapReport:
    report = RewrapReport()
    keys = [k for k, _ in backend.list_objects(prefix) if k.endswith(MANIFEST_SUFFIX)]
    report.scanned = len(keys)
    with ThreadPoolExecutor(max(1, concurrency), thread_name_prefix="tierlog-rewrap") as pool:
        outcomes = list(pool.map(lambda k: _rewrap_one(backend, keyring, k, dry_run), keys))
    for key, outcome in zip(keys, outcomes, strict=True):
        if outcome == "rewrapped":
            report.rewrapped += 1
        elif outcome == "active":
            report.already_active += 1
        elif outcome == "unencrypted":
            report.unencrypted += 1
        elif outcome == "vanished":
            report.vanished += 1
        else:
            report.failed.append((key, outcome))
    return report


def _rewrap_one(backend: ObjectBackend, keyring: KeyRing, key: str, dry_run: bool) -> str:
    try:
        manifest = SegmentManifest.from_json_bytes(backend.get(key, "manifest"))
    except RemoteResourceNotFoundException:
        return "vanished"
    except (ManifestError, RemoteStorageException) as e:
        return f"error: {e}"
    enc = manifest.encryption
    if enc is None:
        return "unencrypted"
    if enc.key_id == keyring.active_id:
        return "active"
    try:
        data_key = keyring.unwrap(enc.key_id, enc.wrapped_key)
        key_id, wrapped = keyring.wrap(data_key)
    except RemoteStorageException as e:
        return f"error: {e}"
    if dry_run:
        return "rewrapped"
    updated = manifest.with_encryption(
        EncryptionInfo(key_id, wrapped, enc.aad, wrap_algorithm=WRAP_ALGORITHM)
    )
    try:
        backend.put_bytes(key, updated.to_json_bytes(), "manifest")
        log_key = key[: -len(MANIFEST_SUFFIX)] + LOG_SUFFIX
        if backend.head(log_key) is None:
            backend.delete_many([key])
            return "vanished"
    except RemoteStorageException as e:
        return f"error: {e}"
    return "rewrapped"


def read_properties(path: Path) -> dict[str, str]:
    """The ``key=value`` lines of a Java-style properties file (comments and blanks
    skipped); enough for broker config files."""
    props: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            continue
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


def plugin_props_from(props: Mapping[str, str]) -> dict[str, str]:
    """Accept either broker properties (``rsm.config.`` keys) or bare plugin keys."""
    prefixed = {k[len("rsm.config.") :]: v for k, v in props.items() if k.startswith("rsm.config.")}
    return prefixed or dict(props)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tierlog keys rewrap",
        description="Re-wrap segment data keys onto the active key-encryption key.",
    )
    parser.add_argument(
        "--config", required=True, type=Path, help="broker server.properties (rsm.config.*)"
    )
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="config override"
    )
    parser.add_argument("--topic-prefix", default="", help="only manifests under this sub-prefix")
    parser.add_argument("--dry-run", action="store_true", help="count, do not write")
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args(argv)
    props = read_properties(args.config)
    for item in args.override:
        key, _, value = item.partition("=")
        props[key.strip()] = value.strip()
    cfg = ObjectStoreConfig.from_props(plugin_props_from(props))
    if not cfg.encryption_key_pairs or cfg.encryption_key_pair_id is None:
        print("no key ring configured (encryption.key.pairs)", file=sys.stderr)
        return 2
    keyring = KeyRing.from_files(cfg.encryption_key_pairs, cfg.encryption_key_pair_id)
    backend = ObjectBackend.from_config(cfg)
    report = rewrap_manifests(
        backend,
        keyring,
        cfg.key_prefix + args.topic_prefix,
        dry_run=args.dry_run,
        concurrency=args.concurrency,
    )
    verb = "would re-wrap" if args.dry_run else "re-wrapped"
    print(
        f"scanned {report.scanned} manifests: {verb} {report.rewrapped} onto "
        f"{keyring.active_id!r}, {report.already_active} already on it, "
        f"{report.unencrypted} unencrypted, {report.vanished} deleted meanwhile, "
        f"{len(report.failed)} failed"
    )
    for key, reason in report.failed:
        print(f"  {key}: {reason}", file=sys.stderr)
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
