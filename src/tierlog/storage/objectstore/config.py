"""Typed settings of the object-store plugin, parsed once from the ``rsm.config.`` props.

Keys are given without the ``rsm.config.`` prefix (the broker strips it). Every parse error
names the offending key so a bad broker config fails at start-up, not at first upload.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from tierlog.storage.objectstore.errors import ObjectStoreConfigError

KiB = 1024
MiB = 1024 * KiB

CACHE_CLASSES = ("memory", "disk", "none")
SCHEMES = ("s3", "gs", "az", "file", "memory")
#: The largest object prefix that keeps custom metadata within Kafka's 128-byte default.
MAX_PREFIX_BYTES = 100
#: S3 rejects multipart parts smaller than this (except the last one).
S3_MIN_PART_SIZE = 5 * MiB


@dataclass(frozen=True)
class KeyPairFiles:
    public_key_file: Path
    private_key_file: Path | None


@dataclass(frozen=True)
class ObjectStoreConfig:
    storage_url: str
    scheme: str
    bucket: str
    #: Object-key prefix taken from the URL path ("" or ending in "/").
    key_prefix: str
    #: Hex mask of the hash directory inserted before the topic directory (0 = off).
    key_prefix_mask: int = 0
    #: Backend client options handed to obstore (``storage.option.<name>`` plus named keys).
    store_options: Mapping[str, str] = field(default_factory=dict)
    request_timeout_ms: int = 30_000
    connect_timeout_ms: int = 5_000
    retry_max: int = 3
    retry_timeout_ms: int = 30_000
    chunk_size: int = 4 * MiB
    compression_enabled: bool = False
    compression_heuristic_enabled: bool = True
    compression_level: int = 1
    encryption_enabled: bool = False
    encryption_key_pair_id: str | None = None
    encryption_key_pairs: Mapping[str, KeyPairFiles] = field(default_factory=dict)
    upload_part_size: int = 8 * MiB
    upload_max_concurrency: int = 4
    upload_rate_limit_bytes_per_second: int | None = None
    fetch_chunk_cache_class: str = "memory"
    fetch_chunk_cache_size: int = 256 * MiB
    fetch_chunk_cache_path: Path | None = None
    fetch_chunk_cache_retention_ms: int = 600_000
    fetch_chunk_cache_prefetch_max_size: int = 16 * MiB
    fetch_chunk_cache_prefetch_total_max_size: int = 256 * MiB
    fetch_chunk_cache_prefetch_idle_timeout_ms: int = 5_000
    fetch_chunk_cache_prefetch_max_concurrency: int = 32
    fetch_manifest_cache_size: int = 16 * MiB
    fetch_manifest_cache_retention_ms: int = 3_600_000
    fetch_indexes_cache_size: int = 32 * MiB
    fetch_indexes_cache_retention_ms: int = 600_000
    fetch_thread_pool_size: int = 8
    fetch_direct_get_enabled: bool = True
    fetch_buffers_pretouch_enabled: bool = False
    custom_metadata_enabled: bool = True

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> ObjectStoreConfig:
        p = _Props(props)
        url = p.required("storage.url")
        scheme, bucket, prefix = parse_storage_url(url)
        options = _store_options(p, scheme)
        chunk_size = p.integer("chunk.size", 4 * MiB, minimum=1, maximum=1 << 30)
        part_size = p.integer("upload.part.size", 8 * MiB, minimum=1)
        if scheme == "s3" and part_size < S3_MIN_PART_SIZE:
            raise ObjectStoreConfigError(
                f"upload.part.size={part_size} is below S3's minimum part size {S3_MIN_PART_SIZE}"
            )
        encryption = p.boolean("encryption.enabled", False)
        # The key ring is loaded whenever it is configured, so segments written while
        # encryption was on stay readable after it is switched off.
        key_pair_id = p.optional("encryption.key.pair.id")
        key_pairs: dict[str, KeyPairFiles] = {}
        ids_raw = p.optional("encryption.key.pairs")
        if encryption or ids_raw:
            key_pair_id = p.required("encryption.key.pair.id")
            ids = [i.strip() for i in p.required("encryption.key.pairs").split(",") if i.strip()]
            if key_pair_id not in ids:
                raise ObjectStoreConfigError(
                    f"encryption.key.pair.id={key_pair_id!r} is not listed in encryption.key.pairs"
                )
            for kid in ids:
                pub = p.required(f"encryption.key.pairs.{kid}.public.key.file")
                priv = p.optional(f"encryption.key.pairs.{kid}.private.key.file")
                key_pairs[kid] = KeyPairFiles(Path(pub), Path(priv) if priv else None)
        cache_class = p.choice("fetch.chunk.cache.class", "memory", CACHE_CLASSES)
        cache_path_raw = p.optional("fetch.chunk.cache.path")
        if cache_class == "disk" and not cache_path_raw:
            raise ObjectStoreConfigError(
                "fetch.chunk.cache.path is required when fetch.chunk.cache.class=disk"
            )
        if len(prefix.encode()) > MAX_PREFIX_BYTES:
            raise ObjectStoreConfigError(
                f"storage.url prefix {prefix!r} is longer than {MAX_PREFIX_BYTES} bytes; "
                "segment custom metadata would exceed Kafka's 128-byte default"
            )
        rate = p.optional("upload.rate.limit.bytes.per.second")
        rate_limit = None
        if rate is not None and rate.strip():
            rate_limit = p.integer("upload.rate.limit.bytes.per.second", 0, minimum=64 * KiB)
        return cls(
            storage_url=url,
            scheme=scheme,
            bucket=bucket,
            key_prefix=prefix,
            key_prefix_mask=_mask(p),
            store_options=options,
            request_timeout_ms=p.integer("storage.request.timeout.ms", 30_000, minimum=1),
            connect_timeout_ms=p.integer("storage.connect.timeout.ms", 5_000, minimum=1),
            retry_max=p.integer("storage.retry.max", 3, minimum=0),
            retry_timeout_ms=p.integer("storage.retry.timeout.ms", 30_000, minimum=1),
            chunk_size=chunk_size,
            compression_enabled=p.boolean("compression.enabled", False),
            compression_heuristic_enabled=p.boolean("compression.heuristic.enabled", True),
            compression_level=p.integer("compression.level", 1, minimum=-7, maximum=22),
            encryption_enabled=encryption,
            encryption_key_pair_id=key_pair_id,
            encryption_key_pairs=key_pairs,
            upload_part_size=part_size,
            upload_max_concurrency=p.integer("upload.max.concurrency", 4, minimum=1, maximum=64),
            upload_rate_limit_bytes_per_second=rate_limit,
            fetch_chunk_cache_class=cache_class,
            fetch_chunk_cache_size=p.integer("fetch.chunk.cache.size", 256 * MiB, minimum=0),
            fetch_chunk_cache_path=Path(cache_path_raw) if cache_path_raw else None,
            fetch_chunk_cache_retention_ms=p.integer(
                "fetch.chunk.cache.retention.ms", 600_000, minimum=1
            ),
            fetch_chunk_cache_prefetch_max_size=p.integer(
                "fetch.chunk.cache.prefetch.max.size", 16 * MiB, minimum=0
            ),
            fetch_chunk_cache_prefetch_total_max_size=p.integer(
                "fetch.chunk.cache.prefetch.total.max.size", 256 * MiB, minimum=0
            ),
            fetch_chunk_cache_prefetch_idle_timeout_ms=p.integer(
                "fetch.chunk.cache.prefetch.idle.timeout.ms", 5_000, minimum=1
            ),
            fetch_chunk_cache_prefetch_max_concurrency=p.integer(
                "fetch.chunk.cache.prefetch.max.concurrency", 32, minimum=1, maximum=256
            ),
            fetch_manifest_cache_size=p.integer("fetch.manifest.cache.size", 16 * MiB, minimum=0),
            fetch_manifest_cache_retention_ms=p.integer(
                "fetch.manifest.cache.retention.ms", 3_600_000, minimum=1
            ),
            fetch_indexes_cache_size=p.integer("fetch.indexes.cache.size", 32 * MiB, minimum=0),
            fetch_indexes_cache_retention_ms=p.integer(
                "fetch.indexes.cache.retention.ms", 600_000, minimum=1
            ),
            fetch_thread_pool_size=p.integer("fetch.thread.pool.size", 8, minimum=1, maximum=256),
            fetch_direct_get_enabled=p.boolean("fetch.direct.get.enabled", True),
            fetch_buffers_pretouch_enabled=p.boolean("fetch.buffers.pretouch.enabled", False),
            custom_metadata_enabled=p.boolean("custom.metadata.enabled", True),
        )


def parse_storage_url(url: str) -> tuple[str, str, str]:
    """Split ``scheme://bucket/prefix`` into (scheme, bucket, prefix-with-trailing-slash).

    For ``file:///path`` the "bucket" is the directory and the prefix is empty.
    """
    parsed = urlparse(url)
    scheme = parsed.scheme
    if scheme not in SCHEMES:
        raise ObjectStoreConfigError(
            f"storage.url={url!r}: scheme must be one of {', '.join(SCHEMES)}"
        )
    if scheme == "file":
        if parsed.netloc not in ("", "localhost") or not parsed.path.startswith("/"):
            raise ObjectStoreConfigError(f"storage.url={url!r}: expected file:///absolute/path")
        return scheme, unquote(parsed.path), ""
    if scheme == "memory":
        return scheme, "", _normalise_prefix(parsed.netloc + parsed.path)
    if not parsed.netloc:
        raise ObjectStoreConfigError(f"storage.url={url!r}: missing bucket/container name")
    return scheme, parsed.netloc, _normalise_prefix(parsed.path)


def _normalise_prefix(path: str) -> str:
    path = path.strip("/")
    return f"{path}/" if path else ""


# Named keys mapped onto obstore's per-backend option names; anything else can be passed
# verbatim as ``storage.option.<obstore name>``.
_NAMED_OPTIONS: dict[str, dict[str, str]] = {
    "s3": {
        "storage.s3.endpoint.url": "endpoint",
        "storage.s3.region": "region",
        "storage.aws.access.key.id": "access_key_id",
        "storage.aws.secret.access.key": "secret_access_key",
        "storage.aws.session.token": "session_token",
    },
    "gs": {
        "storage.gcs.credentials.path": "service_account",
        "storage.gcs.credentials.json": "service_account_key",
        "storage.gcs.endpoint.url": "base_url",
    },
    "az": {
        "storage.azure.account.name": "account_name",
        "storage.azure.account.key": "account_key",
        "storage.azure.sas.token": "sas_key",
        "storage.azure.endpoint.url": "endpoint",
    },
}


#: Settings that hold credentials or point at private key material. Free-form
#: ``storage.option.*`` values go to obstore unchecked and may be credentials too.
SECRET_KEYS = frozenset(
    {
        "storage.aws.access.key.id",
        "storage.aws.secret.access.key",
        "storage.aws.session.token",
        "storage.gcs.credentials.json",
        "storage.gcs.credentials.path",
        "storage.azure.account.key",
        "storage.azure.sas.token",
    }
)


def is_secret_key(key: str) -> bool:
    """Whether DescribeConfigs must hide this setting (see ``config_is_sensitive``)."""
    key = key.removeprefix("rsm.config.")
    return (
        key in SECRET_KEYS
        or key.startswith("storage.option.")
        or (key.startswith("encryption.key.pairs.") and key.endswith(".private.key.file"))
    )


def _store_options(p: _Props, scheme: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for key, name in _NAMED_OPTIONS.get(scheme, {}).items():
        value = p.optional(key)
        if value:
            options[name] = value
    if scheme == "s3" and p.optional("storage.s3.path.style.access.enabled") is not None:
        path_style = p.boolean("storage.s3.path.style.access.enabled", False)
        options["virtual_hosted_style_request"] = "false" if path_style else "true"
    if scheme == "az" and p.boolean("storage.azure.use.emulator", False):
        options["use_emulator"] = "true"
    for key, value in p.items():
        if key.startswith("storage.option."):
            options[key[len("storage.option.") :]] = value
    return options


def _mask(p: _Props) -> int:
    raw = p.optional("key.prefix.mask")
    if raw is None or raw.strip().lower() in ("", "false", "0"):
        return 0
    if raw.strip().lower() == "true":
        return 0xFFFFFFFF
    try:
        mask = int(raw.strip(), 0)
    except ValueError:
        raise ObjectStoreConfigError(
            f"key.prefix.mask={raw!r}: expected true/false or an integer mask like 0xff"
        ) from None
    if not 0 <= mask <= 0xFFFFFFFF:
        raise ObjectStoreConfigError(f"key.prefix.mask={raw!r}: must fit in 32 bits")
    return mask


class _Props:
    """Typed accessors over the raw string properties, with key-naming errors."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self._props = {k.removeprefix("rsm.config."): v for k, v in props.items()}

    def items(self) -> list[tuple[str, str]]:
        return list(self._props.items())

    def optional(self, key: str) -> str | None:
        return self._props.get(key)

    def required(self, key: str) -> str:
        value = self._props.get(key)
        if value is None or not value.strip():
            raise ObjectStoreConfigError(f"{key} is required")
        return value.strip()

    def boolean(self, key: str, default: bool) -> bool:
        raw = self._props.get(key)
        if raw is None:
            return default
        lowered = raw.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise ObjectStoreConfigError(f"{key}={raw!r}: expected true or false")

    def integer(
        self, key: str, default: int, *, minimum: int | None = None, maximum: int | None = None
    ) -> int:
        raw = self._props.get(key)
        if raw is None or not raw.strip():
            return default
        try:
            value = int(raw.strip())
        except ValueError:
            raise ObjectStoreConfigError(f"{key}={raw!r}: expected an integer") from None
        if minimum is not None and value < minimum:
            raise ObjectStoreConfigError(f"{key}={value}: must be >= {minimum}")
        if maximum is not None and value > maximum:
            raise ObjectStoreConfigError(f"{key}={value}: must be <= {maximum}")
        return value

    def choice(self, key: str, default: str, choices: tuple[str, ...]) -> str:
        raw = self._props.get(key)
        if raw is None or not raw.strip():
            return default
        value = raw.strip().lower()
        if value not in choices:
            raise ObjectStoreConfigError(f"{key}={raw!r}: expected one of {', '.join(choices)}")
        return value
