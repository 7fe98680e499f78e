"""The API resources tierra reads and writes, and the URL paths to them.

One table instead of generated per-kind methods: the informer, the binder, the snapshot
writer and the controller all address objects as (resource, namespace, name,
subresource), so adding a kind is one line here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

if TYPE_CHECKING:
    from tierra.kube.client import Kube


@dataclass(frozen=True, slots=True)
class Resource:
    """``group`` is "" for the core API; ``kind`` is what objects of it say."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def name(self) -> str:
        """``pods``, ``podgroups.scheduling.volcano.sh``: what kubectl and RBAC call it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str = ""
    ) -> str:
        """The URL path: all namespaces when ``namespace`` is None for a namespaced kind."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base

    def key(self, obj: dict[str, object]) -> str:
        """``ns/name`` (or ``name``) of a raw object of this resource."""
        md = obj.get("metadata")
        md = md if isinstance(md, dict) else {}
        name = str(md.get("name", ""))
        return f"{md.get('namespace', '')}/{name}" if self.namespaced else name


NODES = Resource("", "v1", "nodes", "Node", False)
PODS = Resource("", "v1", "pods", "Pod", True)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
EVENTS = Resource("", "v1", "events", "Event", True)
PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease", True)
# What the pod rules read about volumes (issue 24).
PVCS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True)
PVS = Resource("", "v1", "persistentvolumes", "PersistentVolume", False)
STORAGE_CLASSES = Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False)
CSINODES = Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False)
CSIDRIVERS = Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False)
CSI_CAPACITIES = Resource(
    "storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True
)
EVICTION_VERSION = "policy/v1"

TIERRA_HYPERNODES = Resource("topology.tierra.dev", "v1alpha1", "hypernodes", "HyperNode", False)
VOLCANO_HYPERNODES = Resource("topology.volcano.sh", "v1alpha1", "hypernodes", "HyperNode", False)
HYPERNODES = (TIERRA_HYPERNODES, VOLCANO_HYPERNODES)
VOLCANO_PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True)
VOLCANO_QUEUES = Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False)

# The upstream Workload API (KEP-4671, KEP-5832): served by Kubernetes 1.36 with the
# GenericWorkload feature gate and --runtime-config=scheduling.k8s.io/v1alpha2=true.
WORKLOADS = Resource("scheduling.k8s.io", "v1alpha2", "workloads", "Workload", True)
WORKLOAD_PODGROUPS = Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup", True)

CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)

# The topology controller and the webhook (issue 12).
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap", True)
SECRETS = Resource("", "v1", "secrets", "Secret", True)
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False)
# Dynamic Resource Allocation (issue 20): what the scheduler reads and, for claims, writes.
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True)
RESOURCE_CLAIM_TEMPLATES = Resource(
    "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True
)
DRA = (DEVICE_CLASSES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES, RESOURCE_SLICES)
VALIDATING_WEBHOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    False,
)
KUEUE_TOPOLOGIES = Resource("kueue.x-k8s.io", "v1beta2", "topologies", "Topology", False)
KAI_TOPOLOGIES = Resource("kai.scheduler", "v1alpha1", "topologies", "Topology", False)

# cluster-autoscaler's atomic scale-up requests (the scheduler, --provisioning-class-name).
POD_TEMPLATES = Resource("", "v1", "podtemplates", "PodTemplate", True)
PROVISIONING_REQUESTS = Resource(
    "autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest", True
)

# Always served by a Kubernetes API server; the others may be missing (CRDs not
# installed, an alpha API switched off).
BUILT_IN = frozenset(
    {
        NODES,
        PODS,
        NAMESPACES,
        EVENTS,
        PRIORITY_CLASSES,
        LEASES,
        PVCS,
        PVS,
        STORAGE_CLASSES,
        CSINODES,
        CSIDRIVERS,
        CSI_CAPACITIES,
    }
)


async def served(kube: Kube, resources: Iterable[Resource]) -> set[Resource]:
    """Which of ``resources`` the API server serves (one discovery request per group)."""
    from tierra.kube.client import ApiError  # noqa: PLC0415 - client imports nothing here

    by_group: dict[str, list[Resource]] = {}
    for res in resources:
        by_group.setdefault(res.api_version, []).append(res)

    async def one(api_version: str, wanted: list[Resource]) -> list[Resource]:
        path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        try:
            body = await kube.get(path, what=f"discover {api_version}")
        except ApiError as exc:
            if exc.status == 404:
                return []
            raise
        plurals = {str(item.get("name")) for item in body.get("resources") or []}
        return [res for res in wanted if res.plural in plurals]

    # All at once: a scheduler asks about a dozen groups before it can list anything.
    found = await asyncio.gather(*(one(v, w) for v, w in by_group.items()))
    return {res for group in found for res in group}
