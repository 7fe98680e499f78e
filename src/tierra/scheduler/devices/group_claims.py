"""Claims a whole PodGroup shares (``DRAWorkloadResourceClaims``), as Kubernetes defines them.

After k8s.io/dynamic-resource-allocation/resourceclaim (v0.36.3, ``BindTo`` and
``IsReservedForPod``) and kube-scheduler's DynamicResources plugin with the gate on:

* a pod's claim is its PodGroup's when the pod names the group
  (``spec.schedulingGroup.podGroupName``) and the group lists a claim with the same
  name, the same ResourceClaim and the same template (``group_claim``);
* such a claim is reserved for the PodGroup (``status.reservedFor`` gets
  ``{apiGroup: scheduling.k8s.io, resource: podgroups, name, uid}``), not for each pod,
  and is allocated once (``consumer``);
* a claim reserved for a pod's PodGroup counts as reserved for the pod
  (``reserved_for_pod``): the pod's later siblings write nothing.

The group's pods must then run where the claim's devices are: on the node of a
node-local device, inside the node selector of devices published for several nodes.
``DeviceClaims`` keeps a gang there (``reach``).
"""

from __future__ import annotations

from collections.abc import Mapping

from tierra.api.pod import Pod, PodClaim
from tierra.api.podgroup import PodGroup
from tierra.api.resource import ConsumerRef, ResourceClaim

SCHEDULING_GROUP = "scheduling.k8s.io"
PODGROUPS = "podgroups"


def group_of(pod: Pod, groups: Mapping[str, PodGroup]) -> PodGroup | None:
    """The upstream PodGroup the pod names, if it shares claims (Volcano's annotation
    does not count: BindTo reads ``spec.schedulingGroup``)."""
    if not pod.scheduling_group:
        return None
    return groups.get(f"{pod.namespace}/{pod.scheduling_group}")


def group_claim(pod: Pod, group: PodGroup | None, pc: PodClaim) -> bool:
    """The pod's claim ``pc`` is its PodGroup's: same name, claim and template."""
    if group is None or group.meta.name != pod.scheduling_group:
        return False
    for g in group.resource_claims:
        if g.name != pc.name or g.template_name != pc.template_name:
            continue
        if g.template_name or g.claim_name == pc.claim_name:
            return True
    return False


def consumer(pod: Pod, group: PodGroup | None, pc: PodClaim) -> ConsumerRef:
    """What the claim is reserved for: the PodGroup for its claims, else the pod."""
    if group is not None and group_claim(pod, group, pc):
        return ConsumerRef(PODGROUPS, group.meta.name, group.meta.uid, SCHEDULING_GROUP)
    return ConsumerRef("pods", pod.name, pod.meta.uid)


def reserved_for_pod(pod: Pod, claim: ResourceClaim) -> bool:
    """``IsReservedForPod`` with the gate on: the pod, or its PodGroup by name."""
    for r in claim.reserved_for:
        if r.uid and r.uid == pod.meta.uid:
            return True
        if (
            r.api_group == SCHEDULING_GROUP
            and r.resource == PODGROUPS
            and pod.scheduling_group
            and r.name == pod.scheduling_group
        ):
            return True
    return False


def consumer_dict(ref: ConsumerRef) -> dict[str, str]:
    """A ``status.reservedFor`` entry as the API takes it."""
    out = {"resource": ref.resource, "name": ref.name, "uid": ref.uid}
    if ref.api_group:
        out = {"apiGroup": ref.api_group, **out}
    return out
