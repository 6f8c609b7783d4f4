"""DescribeUserScramCredentials (50): every user has no SCRAM credential.

tierlog does not authenticate clients yet, so it stores no SCRAM credential, and the true
answer is that none exists, in the form ZooKeeper-mode Kafka gives it: asked for every
user, an empty list; asked for named users, each one RESOURCE_NOT_FOUND (and
DUPLICATE_RESOURCE for a user named twice). Kafka's ``kafka-configs.sh --describe
--entity-type users`` asks this after the users' client quotas, and failed on a broker
that did not serve it. AlterUserScramCredentials is not served: a credential that would
protect nothing must not look stored.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tierlog.protocol.api_keys import ApiKey
from tierlog.protocol.builder import mk
from tierlog.protocol.codec import Request, response_schema
from tierlog.protocol.errors import ErrorCode
from tierlog.server.state import BrokerState


def _refusal(user: str, code: ErrorCode, message: str) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message, "credential_infos": []}


async def handle_describe_user_scram_credentials(state: BrokerState, req: Request) -> Any:
    schema = response_schema(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, req.header.api_version)
    users = [u.name for u in (req.body.users or ())]
    counts = Counter(users)
    results: list[dict[str, Any]] = []
    for user in dict.fromkeys(users):
        if counts[user] > 1:
            results.append(
                _refusal(
                    user,
                    ErrorCode.DUPLICATE_RESOURCE,
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {user}",
                )
            )
        else:
            results.append(
                _refusal(
                    user,
                    ErrorCode.RESOURCE_NOT_FOUND,
                    f"Attempt to describe a user credential that does not exist: {user}",
                )
            )
    return mk(
        schema, throttle_time=0, error_code=ErrorCode.NONE, error_message=None, results=results
    )
