"""``tierlog configs`` (Kafka's ``kafka-configs.sh --bootstrap-server``) run as an operator
runs it against a real broker. What a command changed is read back over the wire
(DescribeConfigs, DescribeClientQuotas), so a test checks the broker, not the CLI's own
words; the printed text is checked against Kafka's format.

One broker serves the module; each test names its own topic or quota entity, so the tests
do not see each other's changes. Broker alterations are left to the dynamic broker configs'
branch, which makes the broker accept them."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.groups_helpers import create_topic
from tests.helpers import client_quotas
from tests.helpers.broker import BrokerProcess
from tests.helpers.client_quotas import MATCH_DEFAULT, MATCH_EXACT
from tests.helpers.cluster import run_cli
from tests.helpers.wire import closed_port
from tierlog.cli import main
from tierlog.client import WireConnection
from tierlog.config.sources import ConfigSource
from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.config_resources import ConfigResourceType


@pytest.fixture(scope="module")
def bootstrap(module_broker: BrokerProcess) -> str:
    return module_broker.bootstrap


def configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("configs", "--bootstrap-server", bootstrap, *args)


def described(
    bootstrap: str, resource_type: int, name: str, synonyms: bool = False
) -> dict[str, Any]:
    """DescribeConfigs over the wire: each key's entry."""
    with WireConnection.to_bootstrap(bootstrap) as conn:
        r = conn.call(
            ApiKey.DESCRIBE_CONFIGS,
            4,
            resources=[
                {"resource_type": resource_type, "resource_name": name, "configuration_keys": None}
            ],
            include_synonyms=synonyms,
            include_documentation=False,
        )
    assert r.results[0].error_code == 0, r.results[0].error_message
    return {str(e.name): e for e in r.results[0].configs}


def overrides(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's dynamic configs as the broker reports them."""
    return {
        k: str(e.value)
        for k, e in described(bootstrap, ConfigResourceType.TOPIC, topic).items()
        if int(e.config_source) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    }


def test_topic_configs_are_added_described_and_deleted(bootstrap: str) -> None:
    create_topic(bootstrap, "cfg-round", 1)
    r = configs(
        bootstrap,
        "--alter",
        "--topic",
        "cfg-round",
        "--add-config",
        "max.message.bytes=2000000,cleanup.policy=[compact,delete]",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Completed updating config for topic cfg-round.\n"
    assert overrides(bootstrap, "cfg-round") == {
        "cleanup.policy": "compact,delete",
        "max.message.bytes": "2000000",
        "retention.ms": "-1",
    }

    r = configs(bootstrap, "--describe", "--entity-type", "topics", "--entity-name", "cfg-round")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic cfg-round are:"
    assert lines[1].startswith(
        "  cleanup.policy=compact,delete sensitive=false synonyms={"
        "DYNAMIC_TOPIC_CONFIG:cleanup.policy=compact,delete, "
    )
    assert lines[2].startswith(
        "  max.message.bytes=2000000 sensitive=false synonyms={"
        "DYNAMIC_TOPIC_CONFIG:max.message.bytes=2000000, "
    )
    assert lines[3].startswith("  retention.ms=-1 sensitive=false ")
    assert len(lines) == 4

    r = configs(
        bootstrap, "--alter", "--topic", "cfg-round", "--delete-config", "max.message.bytes"
    )
    assert r.returncode == 0, r.stderr
    assert overrides(bootstrap, "cfg-round") == {
        "cleanup.policy": "compact,delete",
        "retention.ms": "-1",
    }


def test_deleting_a_key_the_topic_does_not_set_is_refused(bootstrap: str) -> None:
    create_topic(bootstrap, "cfg-nodelete", 1)
    r = configs(bootstrap, "--alter", "--topic", "cfg-nodelete", "--delete-config", "segment.ms")
    assert r.returncode == 1
    assert r.stderr.strip() == "Error: Invalid config(s): segment.ms"
    assert overrides(bootstrap, "cfg-nodelete") == {"retention.ms": "-1"}


def test_add_config_file_sets_the_topic_configs(bootstrap: str, tmp_path: Path) -> None:
    create_topic(bootstrap, "cfg-file", 1)
    props = tmp_path / "topic.properties"
    props.write_text("# retention\nretention.ms = 3600000\nsegment.bytes: 1048576\n")
    r = configs(bootstrap, "--alter", "--topic", "cfg-file", "--add-config-file", str(props))
    assert r.returncode == 0, r.stderr
    assert overrides(bootstrap, "cfg-file") == {
        "retention.ms": "3600000",
        "segment.bytes": "1048576",
    }


def test_a_bad_value_is_refused_with_the_brokers_message(bootstrap: str) -> None:
    """The broker's own refusal of the same change, word for word, and exit 1."""
    create_topic(bootstrap, "cfg-bad", 1)
    with WireConnection.to_bootstrap(bootstrap) as conn:
        answer = conn.call(
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            resources=[
                {
                    "resource_type": ConfigResourceType.TOPIC,
                    "resource_name": "cfg-bad",
                    "configs": [{"name": "retention.ms", "config_operation": 0, "value": "soon"}],
                }
            ],
            validate_only=True,
        ).responses[0]
    assert answer.error_code != 0
    args = ["--alter", "--topic", "cfg-bad", "--add-config", "retention.ms=soon"]
    r = configs(bootstrap, *args)
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "Error while executing config command with args "
        f"'--bootstrap-server {bootstrap} {' '.join(args)}'",
        f"Error: INVALID_CONFIG: {answer.error_message}",
    ]
    assert overrides(bootstrap, "cfg-bad") == {"retention.ms": "-1"}


def test_describe_without_a_name_covers_every_topic(bootstrap: str) -> None:
    create_topic(bootstrap, "cfg-all-a", 1)
    create_topic(bootstrap, "cfg-all-b", 1)
    r = configs(bootstrap, "--describe", "--entity-type", "topics")
    assert r.returncode == 0, r.stderr
    headers = [line for line in r.stdout.splitlines() if not line.startswith("  ")]
    assert "Dynamic configs for topic cfg-all-a are:" in headers
    assert "Dynamic configs for topic cfg-all-b are:" in headers
    assert "Dynamic configs for topic __consumer_offsets are:" in headers


def test_broker_describe_shows_dynamic_configs_and_with_all_every_config(bootstrap: str) -> None:
    on_wire = described(bootstrap, ConfigResourceType.BROKER, "0")
    dynamic = sorted(
        k for k, e in on_wire.items() if int(e.config_source) == ConfigSource.DYNAMIC_BROKER_CONFIG
    )
    r = configs(bootstrap, "--describe", "--broker", "0")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "Dynamic configs for broker 0 are:"
    assert [line.split("=", 1)[0].strip() for line in lines[1:]] == dynamic

    r = configs(bootstrap, "--describe", "--entity-type", "brokers", "--entity-name", "0", "--all")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "All configs for broker 0 are:"
    shown = {line.split("=", 1)[0].strip(): line for line in lines[1:]}
    assert sorted(shown) == sorted(on_wire)
    log_dirs = described(bootstrap, ConfigResourceType.BROKER, "0", synonyms=True)["log.dirs"]
    synonyms = ", ".join(
        f"{ConfigSource(int(x.source)).name}:{x.name}={x.value}" for x in log_dirs.synonyms
    )
    assert shown["log.dirs"] == (
        f"  log.dirs={log_dirs.value} sensitive=false synonyms={{{synonyms}}}"
    )

    r = configs(bootstrap, "--describe", "--entity-type", "brokers")
    assert r.returncode == 0, r.stderr
    headers = [line for line in r.stdout.splitlines() if not line.startswith("  ")]
    assert headers == [
        "Dynamic configs for broker 0 are:",
        "Default configs for brokers in the cluster are:",
    ]


def test_a_broker_the_cluster_does_not_list_is_an_error(bootstrap: str) -> None:
    r = configs(bootstrap, "--describe", "--broker", "7")
    assert r.returncode == 1
    assert "Error: Broker 7 is not in the cluster (brokers: 0)" in r.stderr


def test_client_quotas_are_set_described_and_deleted(bootstrap: str) -> None:
    r = configs(
        bootstrap,
        "--alter",
        "--entity-type",
        "clients",
        "--entity-name",
        "cfg-app",
        "--add-config",
        "producer_byte_rate=10485760,consumer_byte_rate=2048",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Completed updating config for client cfg-app.\n"
    exact = [("client-id", MATCH_EXACT, "cfg-app")]
    _, _, found = client_quotas.describe(bootstrap, exact, strict=True)
    assert found == {
        (("client-id", "cfg-app"),): {
            "consumer_byte_rate": 2048.0,
            "producer_byte_rate": 10485760.0,
        }
    }

    r = configs(bootstrap, "--describe", "--client", "cfg-app")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (
        "Quota configs for client-id 'cfg-app' are consumer_byte_rate=2048.0, "
        "producer_byte_rate=1.048576E7\n"
    )

    r = configs(
        bootstrap, "--alter", "--client", "cfg-app", "--delete-config", "consumer_byte_rate"
    )
    assert r.returncode == 0, r.stderr
    _, _, found = client_quotas.describe(bootstrap, exact, strict=True)
    assert found == {(("client-id", "cfg-app"),): {"producer_byte_rate": 10485760.0}}

    r = configs(
        bootstrap, "--alter", "--client", "cfg-app", "--delete-config", "request_percentage"
    )
    assert r.returncode == 1
    assert r.stderr.strip() == "Error: Invalid config(s): request_percentage"


def test_client_defaults_set_the_default_client_id(bootstrap: str) -> None:
    r = configs(bootstrap, "--alter", "--client-defaults", "--add-config", "request_percentage=25")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Completed updating default config for clients in the cluster.\n"
    default = [("client-id", MATCH_DEFAULT, None)]
    _, _, found = client_quotas.describe(bootstrap, default, strict=True)
    assert found == {(("client-id", None),): {"request_percentage": 25.0}}
    r = configs(bootstrap, "--describe", "--entity-type", "clients", "--entity-default")
    assert r.stdout == "Quota configs for the default client-id are request_percentage=25.0\n"
    r = configs(bootstrap, "--alter", "--client-defaults", "--delete-config", "request_percentage")
    assert r.returncode == 0, r.stderr
    assert client_quotas.describe(bootstrap, default, strict=True)[2] == {}


def test_user_and_user_client_quotas(bootstrap: str) -> None:
    """A user's own quota and its client's are separate entities; a user describe asks for
    SCRAM credentials too, and prints none (no user has one)."""
    r = configs(
        bootstrap, "--alter", "--user", "cfg-alice", "--add-config", "producer_byte_rate=4096"
    )
    assert r.returncode == 0, r.stderr
    r = configs(
        bootstrap,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "cfg-alice",
        "--entity-type",
        "clients",
        "--entity-name",
        "cfg-tool",
        "--add-config",
        "consumer_byte_rate=512",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Completed updating config for user cfg-alice.\n"
    _, _, found = client_quotas.describe(
        bootstrap,
        [("user", MATCH_EXACT, "cfg-alice"), ("client-id", MATCH_EXACT, "cfg-tool")],
        strict=True,
    )
    assert found == {
        (("client-id", "cfg-tool"), ("user", "cfg-alice")): {"consumer_byte_rate": 512.0}
    }

    r = configs(bootstrap, "--describe", "--user", "cfg-alice")
    assert r.returncode == 0, r.stderr
    assert (
        r.stdout == "Quota configs for user-principal 'cfg-alice' are producer_byte_rate=4096.0\n"
    )
    r = configs(
        bootstrap,
        "--describe",
        "--entity-type",
        "users",
        "--entity-name",
        "cfg-alice",
        "--entity-type",
        "clients",
    )
    assert r.stdout == (
        "Quota configs for user-principal 'cfg-alice', client-id 'cfg-tool' are "
        "consumer_byte_rate=512.0\n"
    )


def test_scram_credentials_cannot_be_altered(bootstrap: str) -> None:
    r = configs(
        bootstrap, "--alter", "--user", "cfg-bob", "--add-config", "SCRAM-SHA-256=[password=pw]"
    )
    assert r.returncode == 1
    assert "Error: SCRAM credentials cannot be altered: tierlog does not authenticate" in r.stderr
    r = configs(
        bootstrap,
        "--alter",
        "--user",
        "cfg-bob",
        "--add-config",
        "SCRAM-SHA-256=[password=pw],producer_byte_rate=1",
    )
    assert r.returncode == 1
    assert "Cannot alter both quota and SCRAM credential configs simultaneously" in r.stderr
    exact = [("user", MATCH_EXACT, "cfg-bob")]
    assert client_quotas.describe(bootstrap, exact, strict=True)[2] == {}


def test_ip_quotas_and_their_default(bootstrap: str) -> None:
    r = configs(
        bootstrap, "--alter", "--ip", "10.1.2.3", "--add-config", "connection_creation_rate=5"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Completed updating config for ip 10.1.2.3.\n"
    r = configs(
        bootstrap, "--alter", "--ip-defaults", "--add-config", "connection_creation_rate=50"
    )
    assert r.returncode == 0, r.stderr
    _, _, found = client_quotas.describe(bootstrap, [("ip", MATCH_EXACT, "10.1.2.3")], strict=True)
    assert found == {(("ip", "10.1.2.3"),): {"connection_creation_rate": 5.0}}
    r = configs(bootstrap, "--describe", "--entity-type", "ips", "--entity-default")
    assert r.stdout == "Quota configs for the default ip are connection_creation_rate=50.0\n"
    r = configs(bootstrap, "--alter", "--ip", "10.1.2.3", "--add-config", "producer_byte_rate=1")
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "Error: Only connection quota configs can be added for 'ips' using --bootstrap-server. "
        "Unexpected config names: producer_byte_rate"
    )
    r = configs(
        bootstrap, "--alter", "--ip-defaults", "--delete-config", "connection_creation_rate"
    )
    assert r.returncode == 0, r.stderr


def test_a_key_a_client_cannot_have_is_refused(bootstrap: str) -> None:
    r = configs(bootstrap, "--alter", "--client", "cfg-x", "--add-config", "retention.ms=1")
    assert r.returncode == 1
    assert r.stderr.strip() == (
        "Error: Only quota configs can be added for 'clients' using --bootstrap-server. "
        "Unexpected config names: Set(retention.ms)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--topic", "t"], "Command must include exactly one action: --describe, --alter"),
        (
            ["--describe", "--topic", "t", "--add-config", "a=1"],
            'Option "[describe]" can\'t be used with option "[add-config]"',
        ),
        (
            ["--describe", "--entity-type", "users", "--user", "x"],
            "Duplicate entity type(s) specified: users",
        ),
        (
            ["--describe", "--entity-type", "widgets"],
            "Invalid entity type widgets, the entity type must be one of topics, clients, users, "
            "brokers, ips, broker-loggers, client-metrics with a --bootstrap-server or "
            "--bootstrap-controller argument",
        ),
        (["--describe"], "At least one entity type must be specified"),
        (
            ["--describe", "--entity-type", "topics", "--entity-type", "users"],
            "Only 'users' and 'clients' entity types may be specified together",
        ),
        (
            ["--describe", "--entity-name", "x", "--topic", "t"],
            "--entity-{type,name,default} should not be used in conjunction with specific "
            "entity flags",
        ),
        (
            ["--describe", "--broker", "zero"],
            "The entity name for brokers must be a valid integer broker id, but it is: zero",
        ),
        (
            ["--describe", "--ip", "not an address"],
            "The entity name for ips must be a valid IP or resolvable host, but it is: "
            "not an address",
        ),
        (
            ["--alter", "--entity-type", "topics", "--add-config", "a=1"],
            "an entity name must be specified with --alter of topics",
        ),
        (
            ["--alter", "--entity-type", "clients", "--add-config", "a=1"],
            "an entity-name or default entity must be specified with --alter of users, "
            "clients, brokers or ips",
        ),
        (
            ["--alter", "--topic", "t", "--add-config", "a=1", "--add-config-file", "f"],
            "Only one of --add-config or --add-config-file must be specified",
        ),
        (
            ["--alter", "--topic", "t"],
            "At least one of --add-config, --add-config-file, or --delete-config must be "
            "specified with --alter",
        ),
        (
            ["--alter", "--topic", "t", "--add-config", "a=1=2"],
            'Invalid entity config: all configs to be added must be in the format "key=val".',
        ),
        (
            ["--alter", "--topic", "t", "--add-config", "a b=1"],
            "Invalid character found for config key: a b",
        ),
        (
            [
                "--alter",
                "--entity-type",
                "users",
                "--entity-type",
                "clients",
                "--entity-name",
                "u",
                "--add-config",
                "producer_byte_rate=1",
            ],
            "An entity name must be specified for every entity type",
        ),
        (
            ["--describe", "--broker-logger", "0"],
            "--entity-type broker-loggers is not supported: tierlog has no dynamic logger levels",
        ),
    ],
)
def test_bad_options_are_refused_with_kafkas_messages_before_connecting(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"127.0.0.1:{closed_port()}"
    with pytest.raises(SystemExit) as exited:
        main(["configs", "--bootstrap-server", address, *args])
    assert exited.value.code not in (0, None)
    assert message in str(exited.value.code) + capsys.readouterr().err
