"""Client quota entities and keys as Kafka names them (KIP-55, KIP-546, KIP-612).

An entity is stored under Kafka's ZooKeeper entity path, which is also its identity here:
``users/<user>``, ``users/<user>/clients/<client-id>``, ``clients/<client-id>`` and
``ips/<ip>``, each name *sanitized* as Kafka's ``Sanitizer`` does (URL encoding with ``*`` as
``%2A`` and a space as ``%20``) and ``<default>`` standing for the default entity. Since ``<``
and ``>`` are always encoded, a user really called ``<default>`` never collides with it.

A connection is matched by its IP address (``ips/<ip>``, then ``ips/<default>``) for
``connection_creation_rate``, and a client by ``(user principal, client id)``:
``precedence`` lists the eight levels Kafka searches, most specific first, each with the
name pair its rate is measured under (a quota set for ``users/<default>`` is one rate per
user, shared by that user's client ids; one set for ``clients/<default>`` is one rate per
client id).
"""

from __future__ import annotations

import enum
import ipaddress
import math
from dataclasses import dataclass
from urllib.parse import quote, unquote_plus

DEFAULT = "<default>"
"""A default entity's name in an entity path (``ConfigEntityName.DEFAULT``)."""

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

USERS = "users"
CLIENTS = "clients"
IPS = "ips"
CONFIG_TYPES = (USERS, CLIENTS, IPS)
"""The entity config types below ``/config`` (and in the single-node state file)."""


class QuotaKind(enum.Enum):
    """A quota a client is throttled by; the value is its config key."""

    PRODUCE = "producer_byte_rate"
    FETCH = "consumer_byte_rate"
    REQUEST = "request_percentage"
    CONTROLLER_MUTATION = "controller_mutation_rate"

    @property
    def label(self) -> str:
        """Kafka's quota type name (``Produce``, ``Fetch``, ``Request``,
        ``ControllerMutation``), for metrics."""
        return "".join(word.capitalize() for word in self.name.split("_"))


class ValueType(enum.Enum):
    LONG = "LONG"
    INT = "INT"
    DOUBLE = "DOUBLE"


CONNECTION_CREATION_RATE = "connection_creation_rate"

#: The keys a user or client-id entity takes, with their types (Kafka's ``QuotaConfigs``).
USER_CLIENT_KEYS: dict[str, ValueType] = {
    QuotaKind.PRODUCE.value: ValueType.LONG,
    QuotaKind.FETCH.value: ValueType.LONG,
    QuotaKind.REQUEST.value: ValueType.DOUBLE,
    QuotaKind.CONTROLLER_MUTATION.value: ValueType.DOUBLE,
}
#: The keys an ip entity takes.
IP_KEYS: dict[str, ValueType] = {CONNECTION_CREATION_RATE: ValueType.INT}


class InvalidQuotaRequest(ValueError):
    """An entity, key or value Kafka answers with INVALID_REQUEST; the message is Kafka's."""


class UnsupportedQuotaRequest(ValueError):
    """What Kafka answers with UNSUPPORTED_VERSION (a custom filter entity type)."""


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: Java's URL encoding, ``*`` and space percent-encoded."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote_plus(name)


def _wire_name(sanitized: str) -> str | None:
    return None if sanitized == DEFAULT else desanitize(sanitized)


def _stored_name(name: str | None) -> str:
    return DEFAULT if name is None else sanitize(name)


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """One entity, its names sanitized (``DEFAULT`` for a default); None: not part of it."""

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None

    @property
    def path(self) -> str:
        """Kafka's entity path (``users/u/clients/c``), the key of its config."""
        if self.ip is not None:
            return f"{IPS}/{self.ip}"
        if self.user is not None and self.client_id is not None:
            return f"{USERS}/{self.user}/{CLIENTS}/{self.client_id}"
        if self.user is not None:
            return f"{USERS}/{self.user}"
        return f"{CLIENTS}/{self.client_id}"

    @classmethod
    def from_path(cls, path: str) -> QuotaEntity | None:
        """The entity of an entity path, or None for a path that names none."""
        parts = path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == USERS and parts[1]:
            return cls(user=parts[1])
        if len(parts) == 4 and parts[0] == USERS and parts[2] == CLIENTS and parts[1] and parts[3]:
            return cls(user=parts[1], client_id=parts[3])
        if len(parts) == 2 and parts[0] == CLIENTS and parts[1]:
            return cls(client_id=parts[1])
        if len(parts) == 2 and parts[0] == IPS and parts[1]:
            return cls(ip=parts[1])
        return None

    @classmethod
    def from_wire(cls, components: list[tuple[str, str | None]]) -> QuotaEntity:
        """The entity of an AlterClientQuotas entry, checked as Kafka's
        ``parseAndSanitizeQuotaEntity`` checks it."""
        if not components:
            raise InvalidQuotaRequest("Invalid empty client quota entity")
        names: dict[str, str] = {}
        for entity_type, name in components:
            if entity_type not in ENTITY_TYPES:
                raise InvalidQuotaRequest(f"Unhandled client quota entity type: {entity_type}")
            if name is not None and not name:
                raise InvalidQuotaRequest(f"Empty {entity_type} not supported")
            names[entity_type] = _stored_name(name)
        if IP in names and (USER in names or CLIENT_ID in names):
            raise InvalidQuotaRequest(
                "Invalid quota entity combination, IP entity should not be used with "
                "user/client ID entity."
            )
        ip = names.get(IP)
        if ip is not None and ip != DEFAULT:
            ip = names[IP] = _checked_ip(desanitize(ip))
        return cls(user=names.get(USER), client_id=names.get(CLIENT_ID), ip=names.get(IP))

    def to_wire(self) -> list[tuple[str, str | None]]:
        """(entity type, name or None for the default) as the quota APIs carry them."""
        out: list[tuple[str, str | None]] = []
        if self.user is not None:
            out.append((USER, _wire_name(self.user)))
        if self.client_id is not None:
            out.append((CLIENT_ID, _wire_name(self.client_id)))
        if self.ip is not None:
            out.append((IP, _wire_name(self.ip)))
        return out

    @property
    def keys(self) -> dict[str, ValueType]:
        return IP_KEYS if self.ip is not None else USER_CLIENT_KEYS


def checked_value(key: str, value: float, keys: dict[str, ValueType]) -> str:
    """A value AlterClientQuotas may set, as the text Kafka stores in the entity's config.

    Kafka's checks: an unknown key, and a whole-number key given a fraction, are
    INVALID_REQUEST. Beyond Kafka (which stores them and then throttles every request
    without end, or divides by zero), a value that is not a positive finite number is
    refused too."""
    vtype = keys.get(key)
    if vtype is None:
        raise InvalidQuotaRequest(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidQuotaRequest(f"Configuration {key} must be a positive number, not {value}")
    if vtype is ValueType.DOUBLE:
        return repr(float(value))
    epsilon = 1e-6
    whole = int(value + epsilon)
    if abs(whole - value) > epsilon:
        raise InvalidQuotaRequest(f"Configuration {key} must be a {vtype.value} value")
    return str(whole)


def _checked_ip(name: str) -> str:
    """An ip entity's name: an IP address, kept in its canonical form (so ``::ffff:1.2.3.4``
    and ``1.2.3.4`` are one entity, as the connections' addresses are compared). Kafka also
    takes a host name it can resolve; tierlog refuses one, since a connection is matched by
    its address and a name may resolve differently later."""
    try:
        ip = ipaddress.ip_address(name)
    except ValueError:
        raise InvalidQuotaRequest(f"{name} is not a valid IP address") from None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return sanitize(str(ip))


@dataclass(frozen=True, slots=True)
class Level:
    """One place a client's quota may come from, and the names its rate is measured under."""

    path: str
    measured_as: tuple[str, str]


def precedence(user: str, client_id: str) -> tuple[Level, ...]:
    """Kafka's eight levels for a client, most specific first (``ClientQuotaManager``):
    ``user`` and ``client_id`` as the connection has them (unsanitized)."""
    u, c = sanitize(user), sanitize(client_id)
    both = (u, c)
    user_only = (u, "")
    client_only = ("", c)
    return (
        Level(f"{USERS}/{u}/{CLIENTS}/{c}", both),
        Level(f"{USERS}/{u}/{CLIENTS}/{DEFAULT}", both),
        Level(f"{USERS}/{u}", user_only),
        Level(f"{USERS}/{DEFAULT}/{CLIENTS}/{c}", both),
        Level(f"{USERS}/{DEFAULT}/{CLIENTS}/{DEFAULT}", both),
        Level(f"{USERS}/{DEFAULT}", user_only),
        Level(f"{CLIENTS}/{c}", client_only),
        Level(f"{CLIENTS}/{DEFAULT}", client_only),
    )
