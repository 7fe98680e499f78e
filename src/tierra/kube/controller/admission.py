"""Writes refused by admission, told apart from an API server that is away.

A validating webhook with ``failurePolicy: Fail`` that cannot be called makes the API
server answer 500 ("failed calling webhook"), which looks like the server itself failing;
a webhook that denies answers 4xx. Both mean the controller's writes will keep being
refused until someone acts (run the webhook, or the controller as its exempt
ServiceAccount), so each is counted by its cause and said once in the log.
"""

from __future__ import annotations

from tierra.kube.client import ApiError

DENIED = "denied"
UNREACHABLE = "webhook-unreachable"


def admission_refusal(exc: ApiError) -> str | None:
    """``DENIED``, ``UNREACHABLE`` or None (not admission's doing)."""
    message = exc.message
    if "failed calling webhook" in message:
        return UNREACHABLE
    if "admission webhook" in message and "denied the request" in message:
        return DENIED
    return None


HINT = (
    "HyperNode writes are refused by admission ({cause}): {message}. A controller run "
    "out of the cluster passes tierra's webhook when it runs as its ServiceAccount "
    "(deploy/README.md, 'Running a component out of the cluster')"
)
