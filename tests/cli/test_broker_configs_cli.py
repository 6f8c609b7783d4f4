"""``tierlog broker-configs``, the ``kafka-configs.sh --entity-type brokers`` of tierlog,
against a real broker: the cluster-wide default and the broker's own value are set, shown
with their sources, deleted, and a key that cannot change live is refused with Kafka's
message and a non-zero exit."""

from __future__ import annotations

from collections.abc import Callable

from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import run_cli


def _cli(b: BrokerProcess, action: str, *args: str) -> tuple[int, str, str]:
    r = run_cli("broker-configs", action, "--bootstrap-server", b.bootstrap, *args)
    return r.returncode, r.stdout, r.stderr


def test_set_describe_and_delete_default_and_broker_values(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory()
    code, out, _ = _cli(b, "alter", "--entity-default", "--set", "log.retention.ms=7000000")
    assert code == 0 and "Completed updating config for the default broker." in out
    code, out, _ = _cli(b, "alter", "--entity-name", "0", "--set", "log.retention.ms=9000000")
    assert code == 0, out

    code, out, _ = _cli(b, "describe", "--entity-name", "0")
    assert code == 0
    assert out.splitlines()[0] == "Dynamic configs for broker 0 are:"
    assert (
        "  log.retention.ms=9000000 sensitive=false synonyms={"
        "DYNAMIC_BROKER_CONFIG:log.retention.ms=9000000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7000000, "
        "DEFAULT_CONFIG:log.retention.hours=168}"
    ) in out.splitlines()
    code, out, _ = _cli(b, "describe", "--entity-default")
    assert code == 0 and "log.retention.ms=7000000" in out and "9000000" not in out

    code, out, _ = _cli(b, "alter", "--entity-name", "0", "--delete", "log.retention.ms")
    assert code == 0
    code, out, _ = _cli(b, "describe", "--entity-name", "0")
    assert "log.retention.ms=7000000" in out
    code, out, _ = _cli(b, "describe", "--entity-name", "0", "--all")
    assert code == 0 and "  log.dirs=" in out


def test_a_key_that_cannot_change_live_is_refused(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory()
    code, _, err = _cli(b, "alter", "--entity-name", "0", "--set", "log.dirs=/elsewhere")
    assert code != 0
    assert "INVALID_REQUEST" in err
    assert "Cannot update these configs dynamically: Set(log.dirs)" in err
    code, out, _ = _cli(
        b, "alter", "--entity-default", "--set", "message.max.bytes=2000000", "--validate-only"
    )
    assert code == 0 and "Validated config for the default broker." in out
    code, out, _ = _cli(b, "describe", "--entity-default")
    assert "message.max.bytes" not in out
