"""The comparison's workloads that use more than requests, and what each scheduler honoured.

Three phases of ``compare_phases`` give both schedulers the same pods with the fields a
real workload carries, and then read the placements back, because a scheduler that
ignores a field is faster for it and the rate alone would reward that:

* ``plain-rules``: plain pods (1 GPU) in "apps" of ``APP_SIZE`` pods, as a Deployment's
  replicas; each app carries one of four rules, in turn: required pod anti-affinity on
  the hostname, preferred pod anti-affinity on the hostname (weight 100), topology
  spread over racks with ``DoNotSchedule`` (maxSkew 1), and topology spread over
  hostnames with ``ScheduleAnyway`` (maxSkew 1). ``rules_honoured`` counts, from where
  the pods landed, each rule's violations: a required rule broken is a scheduler's
  bug; a preferred one broken says the scheduler did not score it.
* ``gangs-volumes``: gangs of 8 whose pods each mount their own PersistentVolumeClaim of
  a ``WaitForFirstConsumer`` class with static PersistentVolumes (``kubernetes.io/no-
  provisioner``), each PV reachable from one rack only (``nodeAffinity`` on the rack
  label). Each scheduler must pick, for every pod, a node whose rack has a free PV, and
  write the PV's ``claimRef`` before the binding (VolumeBinding's reserve and pre-bind);
  kube-controller-manager's PV controller runs for both and completes the binding
  (both wait for that in their pre-bind). A no-provisioner claim never gets the
  selected-node annotation (no one would answer it): a rack whose PVs ran out must not
  take a gang. ``volumes_honoured`` checks every pod's PV is in its rack.
* ``gangs-wave``: tierra only (kube-scheduler 1.36 has no equivalent of any of them):
  gangs of 8 using the last wave's constraints, in turn: Kueue's TAS annotations
  (``podset-required-topology`` block, ``podset-slice-required-topology`` rack, slices
  of 4 by completion index; the levels resolve through the HyperNodes label discovery
  makes from the nodes' block and rack labels), a bounded wait (``wait-for-tier: rack``
  for 30 s, then anywhere), and, for one gang in ``EXCLUSIVE_EVERY``, exclusive racks.
  ``wave_honoured`` checks each from the placements. (Slices by hostname under a
  required rack, Kueue's other common shape, are refused by tierra at this commit: see
  the bench's report; block and rack keep the phase about speed.)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from tierra.kube.testing.fake import PodShape, pod_manifest

RACK = "topology.kubernetes.io/rack"
BLOCK = "topology.kubernetes.io/block"
RACKS_PER_BLOCK = 5
HOSTNAME = "kubernetes.io/hostname"
APP_SIZE = 10
RULE_KINDS = ("anti-required", "anti-preferred", "spread-hard", "spread-soft")
VOLUME_CLASS = "bench-local-wffc"
WAVE_KINDS = ("kueue-slices", "bounded-wait")
EXCLUSIVE_EVERY = 6  # one gang in six holds its rack whole (fewer than racks, by far)
WAVE_GANG = 8
SLICE = 4
KUEUE = "kueue.x-k8s.io/"


# --- plain pods with rules ---------------------------------------------------------------


def app_of(index: int) -> tuple[str, str]:
    """The app a plain pod belongs to, and the rule its app carries."""
    app = index // APP_SIZE
    return f"app-{app:04d}", RULE_KINDS[app % len(RULE_KINDS)]


def rules_pod(
    name: str, ns: str, index: int, scheduler_name: str, shape: PodShape
) -> dict[str, Any]:
    """A plain pod of app ``app_of(index)``, with that app's rule."""
    app, kind = app_of(index)
    pod = pod_manifest(name, ns, shape=shape, scheduler_name=scheduler_name, labels={"app": app})
    selector = {"matchLabels": {"app": app}}
    term = {"labelSelector": selector, "topologyKey": HOSTNAME}
    spec = pod["spec"]
    if kind == "anti-required":
        spec["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    elif kind == "anti-preferred":
        weighted = {"weight": 100, "podAffinityTerm": term}
        spec["affinity"] = {
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}
        }
    else:
        hard = kind == "spread-hard"
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": RACK if hard else HOSTNAME,
                "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
                "labelSelector": selector,
            }
        ]
    return pod


def rules_honoured(
    node_of: Mapping[str, str],
    index_of: Mapping[str, int],
    rack_of: Callable[[str], str],
    racks: int,
) -> dict[str, int]:
    """Violations per rule, from the placements (pod name -> node).

    * ``anti-required`` / ``anti-preferred``: pairs of one app's pods on one node;
    * ``spread-hard``: pods above maxSkew, per app, over every rack (all racks are
      eligible: the final skew of a placement made one pod at a time within maxSkew is
      within maxSkew);
    * ``spread-soft``: pods above maxSkew, per app, over the nodes it could have spread
      to (as many as it has pods, far fewer than the cluster's nodes).
    """
    per_app: dict[str, list[str]] = defaultdict(list)
    for pod, node in node_of.items():
        per_app[app_of(index_of[pod])[0]].append(node)
    out = dict.fromkeys(RULE_KINDS, 0)
    for app, nodes in per_app.items():
        kind = RULE_KINDS[int(app.split("-")[1]) % len(RULE_KINDS)]
        if kind.startswith("anti"):
            out[kind] += sum(c * (c - 1) // 2 for c in Counter(nodes).values())
        elif kind == "spread-hard":
            counts = Counter(rack_of(n) for n in nodes)
            low = 0 if len(counts) < racks else min(counts.values())
            out[kind] += sum(max(0, c - low - 1) for c in counts.values())
        else:
            out[kind] += sum(max(0, c - 1) for c in Counter(nodes).values())
    return out


# --- gangs with volumes ------------------------------------------------------------------


def storage_class() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": VOLUME_CLASS},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
    }


def persistent_volume(name: str, rack: str) -> dict[str, Any]:
    """A static PV reachable from the nodes of ``rack`` only (rack-local storage)."""
    match = {"key": RACK, "operator": "In", "values": [rack]}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"bench": "volumes"}},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": VOLUME_CLASS,
            "local": {"path": f"/mnt/{name}"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [match]}]}},
        },
    }


def volumes_per_rack(pods: int, racks: int, largest_gang: int) -> int:
    """Twice a fair share of the pods, and at least a whole large gang: the rack's PVs run
    out before its GPUs when a scheduler packs, so each must count them per rack."""
    return max(largest_gang, -(-2 * pods // racks))


def claim(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": VOLUME_CLASS,
            "resources": {"requests": {"storage": "10Gi"}},
        },
    }


def with_claim(pod: dict[str, Any], claim_name: str) -> dict[str, Any]:
    pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}]
    return pod


def volumes_honoured(
    node_of: Mapping[str, str], volume_of: Mapping[str, str], rack_of: Callable[[str], str]
) -> dict[str, int]:
    """Pods whose claim's PV is not in their node's rack, and pods without a PV yet."""
    wrong = missing = 0
    for pod, node in node_of.items():
        pv = volume_of.get(pod)
        if pv is None:
            missing += 1
        elif pv.rsplit("-", 1)[0].removeprefix("pv-") != rack_of(node):
            wrong += 1
    return {"pv-in-another-rack": wrong, "claim-without-pv": missing}


# --- this wave's gang constraints (tierra only) ------------------------------------------


def block_of(rack: str) -> str:
    """rack-NNN -> block-MM, ``RACKS_PER_BLOCK`` racks to a block (as the nodes are labelled)."""
    return f"block-{int(rack.split('-')[1]) // RACKS_PER_BLOCK:02d}"


def wave_kind(g: int) -> str:
    if g % EXCLUSIVE_EVERY == EXCLUSIVE_EVERY - 1:
        return "exclusive"
    return WAVE_KINDS[g % len(WAVE_KINDS)]


def wave_podgroup(ns: str, gang: str, kind: str) -> dict[str, Any]:
    annotations: dict[str, str] = {}
    topology: dict[str, Any] = {"mode": "hard", "highestTierName": "rack"}
    if kind == "bounded-wait":
        annotations = {
            "topology.tierra.dev/wait-for-tier": "rack",
            "topology.tierra.dev/wait-for": "30s",
        }
        topology = {"mode": "soft"}
    elif kind == "exclusive":
        annotations = {"topology.tierra.dev/exclusive-tier": "rack"}
    spec: dict[str, Any] = {"minMember": WAVE_GANG}
    if kind != "kueue-slices":  # Kueue's gangs say where in their pods' annotations
        spec["networkTopology"] = topology
    meta: dict[str, Any] = {"name": gang, "namespace": ns}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": spec,
    }


def wave_pod(ns: str, gang: str, rank: int, kind: str, shape: PodShape) -> dict[str, Any]:
    annotations = {"scheduling.k8s.io/group-name": gang}
    labels: dict[str, str] = {}
    if kind == "kueue-slices":
        annotations |= {
            f"{KUEUE}podset-required-topology": BLOCK,
            f"{KUEUE}podset-slice-required-topology": RACK,
            f"{KUEUE}podset-slice-size": str(SLICE),
        }
        labels["batch.kubernetes.io/job-completion-index"] = str(rank)
    return pod_manifest(
        f"{gang}-{rank}",
        ns,
        shape=shape,
        scheduler_name="tierra",
        labels=labels,
        annotations=annotations,
    )


def wave_honoured(
    members: Mapping[str, list[str]],
    kinds: Mapping[str, str],
    node_of: Mapping[str, str],
    rack_of: Callable[[str], str],
) -> dict[str, int]:
    """Gangs that broke their constraint, per kind, from the placements:

    * ``kueue-slices``: not in one block, or a slice (ranks 0-3, 4-7) across racks;
    * ``bounded-wait``: not in one rack (there was room for every gang in one);
    * ``exclusive``: a rack it holds also runs another gang's pod.
    """
    out = dict.fromkeys((*WAVE_KINDS, "exclusive"), 0)
    rack_gangs: dict[str, set[str]] = defaultdict(set)
    for gang, pods in members.items():
        for p in pods:
            if p in node_of:
                rack_gangs[rack_of(node_of[p])].add(gang)
    for gang, pods in members.items():
        if not all(p in node_of for p in pods):
            continue
        racks = {rack_of(node_of[p]) for p in pods}
        kind = kinds[gang]
        if kind == "kueue-slices":
            slices = [pods[i : i + SLICE] for i in range(0, len(pods), SLICE)]
            split = any(len({rack_of(node_of[p]) for p in s}) > 1 for s in slices)
            out[kind] += int(len({block_of(r) for r in racks}) > 1 or split)
        elif kind == "bounded-wait":
            out[kind] += int(len(racks) > 1)
        else:
            out[kind] += int(any(rack_gangs[r] != {gang} for r in racks))
    return out
