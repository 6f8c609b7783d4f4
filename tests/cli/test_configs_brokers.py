"""``tierlog configs --alter`` of broker configs against a real broker with dynamic broker
configs: the per-broker value and the cluster default are set, read back over the wire with
their sources, deleted (AlterConfigs replaces the whole dynamic set, so the keys not deleted
must survive), and a key that cannot change live is refused with the broker's message.
Each test has its own broker: a broker-level change would reach every other test's topics."""

from __future__ import annotations

from collections.abc import Callable

from tests.helpers.broker import BrokerProcess
from tests.helpers.cluster import run_cli
from tierlog.client import WireConnection
from tierlog.config.sources import ConfigSource
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.config_resources import ConfigResourceType


def dynamic(bootstrap: str, name: str, source: ConfigSource) -> dict[str, str]:
    """The broker resource's configs set at ``source``'s level, as the broker reports them."""
    with WireConnection.to_bootstrap(bootstrap) as conn:
        r = conn.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[
                {
                    "resource_type": ConfigResourceType.BROKER,
                    "resource_name": name,
                    "configuration_keys": None,
                }
            ],
            include_synonyms=False,
            include_documentation=False,
        )
    assert r.results[0].error_code == 0, r.results[0].error_message
    return {
        str(e.name): str(e.value) for e in r.results[0].configs if int(e.config_source) == source
    }


def test_broker_and_default_configs_are_set_and_deleted(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory()

    def configs(*args: str) -> str:
        r = run_cli("configs", "--bootstrap-server", b.bootstrap, *args)
        assert r.returncode == 0, r.stderr
        return r.stdout

    done = configs("--alter", "--broker-defaults", "--add-config", "log.retention.ms=7000000")
    assert done == "Completed updating default config for brokers in the cluster.\n"
    done = configs(
        "--alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "0",
        "--add-config",
        "log.retention.ms=9000000,log.cleaner.backoff.ms=20000",
    )
    assert done == "Completed updating config for broker 0.\n"
    assert dynamic(b.bootstrap, "", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG) == {
        "log.retention.ms": "7000000"
    }
    assert dynamic(b.bootstrap, "0", ConfigSource.DYNAMIC_BROKER_CONFIG) == {
        "log.cleaner.backoff.ms": "20000",
        "log.retention.ms": "9000000",
    }
    assert (
        "  log.retention.ms=9000000 sensitive=false synonyms={"
        "DYNAMIC_BROKER_CONFIG:log.retention.ms=9000000, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7000000, "
        "DEFAULT_CONFIG:log.retention.hours=168}"
    ) in configs("--describe", "--broker", "0").splitlines()

    configs("--alter", "--broker", "0", "--delete-config", "log.retention.ms")
    assert dynamic(b.bootstrap, "0", ConfigSource.DYNAMIC_BROKER_CONFIG) == {
        "log.cleaner.backoff.ms": "20000"
    }
    configs("--alter", "--broker-defaults", "--delete-config", "log.retention.ms")
    assert dynamic(b.bootstrap, "", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG) == {}


def test_a_broker_config_that_cannot_change_live_is_refused_with_the_brokers_message(
    broker_factory: Callable[..., BrokerProcess],
) -> None:
    b = broker_factory()
    args = ["--alter", "--broker", "0", "--add-config", "log.dirs=/elsewhere"]
    r = run_cli("configs", "--bootstrap-server", b.bootstrap, *args)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "Error while executing config command with args "
        f"'--bootstrap-server {b.bootstrap} {' '.join(args)}'",
        "Error: INVALID_REQUEST: Cannot update these configs dynamically: Set(log.dirs)",
    ]
    assert dynamic(b.bootstrap, "0", ConfigSource.DYNAMIC_BROKER_CONFIG) == {}
