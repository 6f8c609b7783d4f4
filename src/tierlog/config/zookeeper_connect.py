"""``zookeeper.connect``: ``host[:port][,host[:port]...][/chroot]``, as Kafka reads it.

The chroot is one path for the whole string, written after the last host. A host without a
port uses ZooKeeper's client port 2181. The chroot must be an absolute ZooKeeper path without
empty, ``.`` or ``..`` components and without a trailing slash; ``/`` alone means no chroot.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ZOOKEEPER_PORT = 2181


@dataclass(frozen=True)
class ZooKeeperConnect:
    hosts: tuple[tuple[str, int], ...]
    chroot: str | None

    @property
    def hosts_string(self) -> str:
        """The hosts part alone, as a ZooKeeper client takes it (no chroot)."""
        return ",".join(f"{host}:{port}" for host, port in self.hosts)

    def __str__(self) -> str:
        return self.hosts_string + (self.chroot or "")


def parse_zookeeper_connect(text: str) -> ZooKeeperConnect:
    """Parse a connect string; ``ValueError`` says what is wrong with it."""
    text = text.strip()
    hosts_part, slash, path = text.partition("/")
    chroot = _chroot("/" + path) if slash else None
    hosts: list[tuple[str, int]] = []
    for raw_item in hosts_part.split(","):
        item = raw_item.strip()
        if not item:
            raise ValueError(f"empty host in {text!r}")
        host, colon, port_text = item.rpartition(":")
        if not colon:
            host, port_text = item, str(DEFAULT_ZOOKEEPER_PORT)
        if not host:
            raise ValueError(f"empty host name in {item!r}")
        try:
            port = int(port_text)
        except ValueError:
            raise ValueError(f"{port_text!r} in {item!r} is not a port") from None
        if not 0 < port < 65536:
            raise ValueError(f"port {port} in {item!r} is out of range")
        hosts.append((host.strip("[]"), port))
    return ZooKeeperConnect(tuple(hosts), chroot)


def _chroot(path: str) -> str | None:
    if path == "/":
        return None
    if path.endswith("/"):
        raise ValueError(f"chroot {path!r} must not end with '/'")
    for part in path.split("/")[1:]:
        if part in ("", ".", ".."):
            raise ValueError(f"chroot {path!r} has an invalid path component {part!r}")
    return path


def zookeeper_connect_problem(value: object) -> str | None:
    """Validator for the config key: None when ``value`` parses."""
    try:
        parse_zookeeper_connect(str(value))
    except ValueError as e:
        return str(e)
    return None
