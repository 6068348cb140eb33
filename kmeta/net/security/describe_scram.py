"""DescribeUserScramCredentials (api key 50): version 0, answered from a daemon's credential set.

As Kafka's ``ScramControlManager.describeScramCredentials``: users null or empty lists every
user with credentials; a user named twice is DUPLICATE_RESOURCE, one without credentials
RESOURCE_NOT_FOUND. Only mechanisms and iteration counts are described (never salts or keys).
The broker answers from the set the controller pushed, the controller from its own.
"""

from __future__ import annotations

from kmeta.net.security.scram import MECHANISM_IDS, ScramCredentials
from kmeta.protocol.errors import ErrorCode
from kmeta.protocol.messages import describe_user_scram_credentials as dus


def describe(
    credentials: ScramCredentials, request: dus.DescribeUserScramCredentialsRequest
) -> dus.DescribeUserScramCredentialsResponse:
    users = credentials.users
    asked = [u.name for u in request.users] if request.users else sorted(users)
    counts: dict[str, int] = {}
    for name in asked:
        counts[name] = counts.get(name, 0) + 1
    results = []
    for name in dict.fromkeys(asked):
        if counts[name] > 1:
            error, message = (
                ErrorCode.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single request",
            )
        elif name not in users:
            error, message = (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to describe a user credential that does not exist",
            )
        else:
            error, message = ErrorCode.NONE, None
        infos = () if error else tuple(
            dus.CredentialInfo(MECHANISM_IDS[m], c.iterations) for m, c in sorted(users[name].items())
        )  # fmt: skip
        results.append(dus.DescribeUserScramCredentialsResult(name, error, message, infos))
    return dus.DescribeUserScramCredentialsResponse(
        version=request.version, throttle_time_ms=0, error_code=ErrorCode.NONE,
        error_message=None, results=tuple(results),
    )  # fmt: skip
