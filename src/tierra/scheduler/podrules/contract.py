"""The scheduling contract: a pod is placed only if every field that limits where it may
run is honoured; otherwise it stays pending with a reason naming the field.

``HONOURED`` lists the rule kinds the session evaluates. Until a kind is listed, a pod
using it is refused here, whatever room is free: never a silent bind that kube-scheduler
would not make. Preferences (preferred pod affinity, ``ScheduleAnyway`` spread) and the
nominated node change no pod's feasibility and are not refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from tierra.api.pod import Pod
from tierra.api.pod_rules import PlacementRules

HOST_PORTS = "spec.containers[].ports[].hostPort"
POD_AFFINITY = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution"
POD_ANTI_AFFINITY = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
SPREAD = "spec.topologySpreadConstraints (whenUnsatisfiable: DoNotSchedule)"
CLAIMS = "spec.volumes[].persistentVolumeClaim / ephemeral"

# The rule kinds a session evaluates (``podrules/constraints.py``; the list of fields
# tierra reads and refuses is docs/scheduling-contract.md).
HONOURED: frozenset[str] = frozenset({HOST_PORTS, POD_AFFINITY, POD_ANTI_AFFINITY, SPREAD, CLAIMS})


def refused_fields(rules: PlacementRules, honoured: frozenset[str] = HONOURED) -> list[str]:
    """The fields of ``rules`` a session with ``honoured`` rule kinds cannot honour."""
    out: list[str] = []
    for name, present in (
        (HOST_PORTS, rules.host_ports),
        (POD_AFFINITY, rules.affinity),
        (POD_ANTI_AFFINITY, rules.anti_affinity),
        (SPREAD, rules.hard_spread),
        (CLAIMS, rules.claims),
    ):
        if present and name not in honoured:
            out.append(name)
    out.extend(rules.unread)
    return out


def refusal(pods: Iterable[Pod], honoured: frozenset[str] = HONOURED) -> str | None:
    """Why these pods (one gang) cannot be placed as the contract stands, or None."""
    for pod in pods:
        if pod.rules is None:
            continue
        fields = refused_fields(pod.rules, honoured)
        if fields:
            return (
                f"pod {pod.key} sets {', '.join(fields)}, which tierra does not honour yet; "
                "it stays pending rather than be bound where kube-scheduler would refuse it "
                "(schedule it with kube-scheduler, or remove the field)"
            )
    return None
