"""Key-encryption keys: RSA key pairs by id, used to wrap each segment's data key.

The active key wraps new data keys; every key in the ring can unwrap, so rotating means
adding a new key, making it active, and later re-wrapping old manifests (``rewrap``)
before removing the old key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tierlog.storage.objectstore.config import KeyPairFiles
from tierlog.storage.objectstore.errors import ObjectStoreConfigError
from tierlog.tiered.api import RemoteStorageException

WRAP_ALGORITHM = "RSA-OAEP-SHA256"


def _oaep() -> padding.OAEP:
    return padding.OAEP(mgf=padding.MGF1(hashes.SHA256()), algorithm=hashes.SHA256(), label=None)


@dataclass(frozen=True)
class KeyPair:
    public_key: rsa.RSAPublicKey
    private_key: rsa.RSAPrivateKey | None


class KeyRing:
    def __init__(self, keys: Mapping[str, KeyPair], active_id: str) -> None:
        if active_id not in keys:
            raise ObjectStoreConfigError(f"active key {active_id!r} is not in the key ring")
        if ":" in active_id:
            raise ObjectStoreConfigError(f"key id {active_id!r} must not contain ':'")
        self._keys = dict(keys)
        self.active_id = active_id

    @classmethod
    def from_files(cls, files: Mapping[str, KeyPairFiles], active_id: str) -> KeyRing:
        keys: dict[str, KeyPair] = {}
        for kid, paths in files.items():
            public = _load_public(paths.public_key_file, kid)
            private = _load_private(paths.private_key_file, kid) if paths.private_key_file else None
            keys[kid] = KeyPair(public, private)
        return cls(keys, active_id)

    @property
    def key_ids(self) -> list[str]:
        return sorted(self._keys)

    def wrap(self, data_key: bytes) -> tuple[str, bytes]:
        """Wrap with the active key; returns (key id, wrapped bytes)."""
        return self.active_id, self._keys[self.active_id].public_key.encrypt(data_key, _oaep())

    def unwrap(self, key_id: str, wrapped: bytes) -> bytes:
        pair = self._keys.get(key_id)
        if pair is None:
            raise RemoteStorageException(
                f"data key is wrapped by key {key_id!r}, which is not in the key ring "
                f"({', '.join(self.key_ids)})"
            )
        if pair.private_key is None:
            raise RemoteStorageException(f"key {key_id!r} has no private key configured")
        try:
            return pair.private_key.decrypt(wrapped, _oaep())
        except ValueError:
            raise RemoteStorageException(
                f"cannot unwrap data key with key {key_id!r} (wrong key or corrupt manifest)"
            ) from None


def _load_public(path: Path, kid: str) -> rsa.RSAPublicKey:
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError) as e:
        raise ObjectStoreConfigError(
            f"encryption.key.pairs.{kid}.public.key.file={path}: {e}"
        ) from None
    if not isinstance(key, rsa.RSAPublicKey) or key.key_size < 2048:
        raise ObjectStoreConfigError(f"key {kid!r}: expected an RSA public key of >= 2048 bits")
    return key


def _load_private(path: Path, kid: str) -> rsa.RSAPrivateKey:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as e:
        raise ObjectStoreConfigError(
            f"encryption.key.pairs.{kid}.private.key.file={path}: {e}"
        ) from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ObjectStoreConfigError(f"key {kid!r}: expected an RSA private key")
    return key
