"""``tierlog configs``: Kafka 3.7's ``kafka-configs.sh --bootstrap-server`` over the wire
(DescribeConfigs, IncrementalAlterConfigs, AlterConfigs, DescribeClientQuotas,
AlterClientQuotas, DescribeUserScramCredentials).

Modules: ``options`` (the flags and Kafka's checks of them), ``values`` (the configs to add
and delete, Java's number format), ``admin`` (which broker each request goes to),
``resources`` (topics and brokers), ``quotas`` (users, clients and ips). Option errors are
refused before connecting; a refusal after connecting is reported as ``Error: ...`` on stderr
with exit status 1, a broker's error after Kafka's ``Error while executing config command``
line."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tierlog.cli.configs import options, quotas, resources
from tierlog.cli.configs.admin import BrokerRefused, ConfigsAdmin, ConfigsError
from tierlog.cli.configs.options import BROKERS, TOPICS
from tierlog.cli.configs.values import ConfigValueError
from tierlog.client import WireConnection


def run(c: WireConnection, a: argparse.Namespace) -> None:
    """One ``--describe`` or ``--alter`` (checked by ``options.check_args`` first)."""
    admin = ConfigsAdmin(c)
    try:
        if a.alter:
            _alter(admin, a)
        else:
            _describe(admin, a)
    except (ConfigsError, ConfigValueError) as e:
        raise SystemExit(f"Error: {e}") from None
    except BrokerRefused as e:
        print(
            f"Error while executing config command with args '{' '.join(a.argv)}'",
            file=sys.stderr,
        )
        raise SystemExit(f"Error: {e}") from None
    except OSError as e:
        raise SystemExit(f"Error: a broker could not be reached: {e}") from None
    finally:
        admin.close()


def _describe(admin: ConfigsAdmin, a: argparse.Namespace) -> None:
    kind = a.entity_types[0]
    if kind in (TOPICS, BROKERS):
        name = a.entity_names[0] if a.entity_names else None
        resources.describe(admin, kind, name, a.all)
    else:
        quotas.describe(admin, a.entity_types, a.entity_names)


def _alter(admin: ConfigsAdmin, a: argparse.Namespace) -> None:
    kind, name = a.entity_types[0], a.entity_names[0]
    if kind == TOPICS:
        resources.alter_topic(admin, name, a.to_add, a.to_delete)
    elif kind == BROKERS:
        resources.alter_broker(admin, name, a.to_add, a.to_delete)
    else:
        quotas.check_keys(a.entity_types, a.entity_names, a.to_add, a.to_delete)
        quotas.alter(admin, a.entity_types, a.entity_names, a.to_add, a.to_delete)
    if name:
        print(f"Completed updating config for {kind[:-1]} {name}.")
    else:
        print(f"Completed updating default config for {kind} in the cluster.")


def register(sub: Any) -> None:
    """The ``configs`` command."""
    options.register(sub, run)
