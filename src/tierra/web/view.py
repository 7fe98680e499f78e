"""What the topology picture and the HyperNode panel show, computed from the store.

The same roll-ups ``tierra tree`` prints (the index, capacity with bound pods placed,
health), kept current in place where a change allows it: a node's readiness, cordon or
taints update the health counts; a pod bound or gone adds or releases its request. A
change that moves topology (a new node, labels, allocatable, HyperNodes, a resource no
column holds) returns False and the dashboard builds a new view.

Every domain is drawn sized by one *metric* resource (GPUs when the cluster has them,
else CPU cores) split three ways: used (requested by bound pods), unavailable (free on a
node that cannot take pods: NotReady, cordoned or NoExecute) and free (the rest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from tierra.api.node import Node
from tierra.api.pod import Pod
from tierra.api.quantity import byte_counted
from tierra.topology.capacity import Capacity, ResourceAxis
from tierra.topology.health import Health, NodeIssue, node_state
from tierra.topology.index import IntArray, TopologyIndex
from tierra.web.store import Store, gang_of

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915")
NODE_LIMIT = 2048  # nodes listed with a HyperNode; larger domains list their gangs only
GANG_LIMIT = 50  # gangs listed with a HyperNode (the largest first)
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Figures:
    """Per domain (the root last), in metric units: total, used, unavailable."""

    total: FloatArray
    used: FloatArray
    unavailable: FloatArray


def _metric(axis: ResourceAxis, alloc: IntArray) -> str:
    for name in GPU_RESOURCES:
        i = axis.index.get(name)
        if i is not None and alloc[:, i].any():
            return name
    return "cpu"


class TopologyView:
    """Index, capacity and health over the store's nodes, with its bound pods placed."""

    def __init__(self, store: Store) -> None:
        nodes = [store.nodes[k] for k in sorted(store.nodes)]
        hypernodes = [store.hypernodes[k] for k in sorted(store.hypernodes)]
        self.index = ix = TopologyIndex.build(nodes, hypernodes, store.problems)
        self.nodes: dict[str, Node] = {n.name: n for n in nodes}
        pods = list(store.pods.values())
        axis = ResourceAxis(
            [*(r for n in nodes for r in n.allocatable), *(r for p in pods for r in p.requests)]
        )
        self.capacity = Capacity(ix, nodes, axis)
        self.health = Health(ix, nodes)
        self.held: dict[str, tuple[int, IntArray]] = {}  # pod key -> (node, request)
        self.pods_on: list[dict[str, None]] = [{} for _ in ix.node_names]
        self.gangs_of: dict[str, str] = {}  # pod key -> gang key, for pods held here
        self._hold_all(pods)
        self.metric = _metric(axis, self.capacity.node_alloc)
        self._col = axis.index[self.metric]
        self._unit = int(axis.scale[self._col]) / 1000  # ledger units -> whole units

    # -- incremental updates ------------------------------------------------------------

    def node_changed(self, old: Node | None, new: Node | None) -> bool:
        """Apply a node's new health in place; False when the index must be rebuilt."""
        if old is None or new is None or new.name not in self.nodes:
            return False
        if old.labels != new.labels or old.allocatable != new.allocatable:
            return False
        self.nodes[new.name] = new
        self.health.update(new)
        self._changed()
        return True

    def pod_changed(self, old: Pod | None, new: Pod | None) -> bool:
        """Release the old pod's hold and place the new one's; False: rebuild (new resource)."""
        if new is not None and self.capacity.axis.missing(new.requests):
            return False
        if old is not None:
            self._release(old.key)
        if new is not None:
            self._hold(new)
        self._changed()
        return True

    def _hold_all(self, pods: Sequence[Pod]) -> None:
        """Place every pod holding resources at once (a snapshot's 160,000 pods in a
        fraction of a second; one by one they took seconds)."""
        axis, node_ix = self.capacity.axis, self.index.node_ix
        vectors: dict[tuple[tuple[str, int], ...], IntArray] = {}  # gangs share requests
        nodes: list[int] = []
        rows: list[IntArray] = []
        for pod in pods:
            n = node_ix.get(pod.node_name)
            if not pod.holds_resources or n is None:
                continue
            shape = tuple(pod.requests.items())
            vec = vectors.get(shape)
            if vec is None:
                vec = vectors[shape] = axis.vector(pod.requests)
            nodes.append(n)
            rows.append(vec)
            self._record(pod, n, vec)
        if rows:
            self.capacity.place_all(np.asarray(nodes, dtype=np.int64), np.stack(rows))

    def _hold(self, pod: Pod) -> None:
        n = self.index.node_ix.get(pod.node_name)
        if not pod.holds_resources or n is None:
            return
        vec = self.capacity.axis.vector(pod.requests)
        self.capacity.place(n, vec)
        self._record(pod, n, vec)

    def _record(self, pod: Pod, n: int, vec: IntArray) -> None:
        self.held[pod.key] = (n, vec)
        self.pods_on[n][pod.key] = None
        self.gangs_of[pod.key] = gang_of(pod)

    def _release(self, key: str) -> None:
        found = self.held.pop(key, None)
        if found is None:
            return
        n, vec = found
        self.capacity.remove(n, vec)
        self.pods_on[n].pop(key, None)
        self.gangs_of.pop(key, None)

    def _changed(self) -> None:
        for name in ("figures", "placements", "achieved"):
            self.__dict__.pop(name, None)

    # -- roll-ups -----------------------------------------------------------------------

    @cached_property
    def figures(self) -> Figures:
        cap, c = self.capacity, self._col
        alloc, used = cap.node_alloc[:, c], cap.node_used[:, c]
        unhealthy = self.health.node_flags.any(axis=1)
        unavailable = np.where(unhealthy, np.maximum(alloc - used, 0), 0)
        unit = self._unit
        return Figures(
            total=np.asarray(cap.dom_alloc[:, c] * unit, dtype=np.float64),
            used=np.asarray(cap.dom_used[:, c] * unit, dtype=np.float64),
            unavailable=np.asarray(
                self.index.sum_under(unavailable.astype(np.int64)) * unit, dtype=np.float64
            ),
        )

    @cached_property
    def placements(self) -> tuple[IntArray, IntArray, list[str]]:
        """Every held pod as (node, gang id) arrays, and the gang keys by id (ids in name
        order, so ties between gangs break by name)."""
        keys = list(self.held)
        names = sorted(set(self.gangs_of.values()))
        ids = {g: i for i, g in enumerate(names)}
        node = np.fromiter((self.held[k][0] for k in keys), dtype=np.int64, count=len(keys))
        gang = np.fromiter((ids[self.gangs_of[k]] for k in keys), dtype=np.int64, count=len(keys))
        return node, gang, names

    def outside_nodes(self) -> IntArray:
        """Nodes no HyperNode holds (only the virtual root does)."""
        return np.flatnonzero(np.diff(self.index.domain_ptr) == 1).astype(np.int64)

    @cached_property
    def achieved(self) -> dict[str, int]:
        """Each gang's lowest usable domain holding every node its pods hold (the tier it
        achieved; ties by name, the root when no HyperNode holds them all).

        All gangs at once over (gang, node) pairs and the index's CSR of domains per node:
        a domain holds all of a gang's nodes when it appears once for each of them.
        """
        node, gang, names = self.placements
        if not len(node):
            return {}
        ix = self.index
        n_nodes = len(ix.node_names)
        pairs = np.unique(gang * n_nodes + node)
        g, n = np.divmod(pairs, n_nodes)
        spans = ix.domain_ptr[n + 1] - ix.domain_ptr[n]
        at = np.repeat(ix.domain_ptr[n] - np.cumsum(spans) + spans, spans) + np.arange(spans.sum())
        dom = ix.domain_idx[at]
        owner = np.repeat(g, spans)
        n_dom = ix.root + 1
        keys, counts = np.unique(owner * n_dom + dom, return_counts=True)
        kg, kd = np.divmod(keys, n_dom)
        need = np.bincount(g, minlength=len(names))
        ok = (counts == need[kg]) & ((kd == ix.root) | ix.usable[kd])
        kg, kd = kg[ok], kd[ok]
        order = np.lexsort((kd, ix.tier[kd], kg))  # per gang: lowest tier, then name order
        kg, kd = kg[order], kd[order]
        first = np.concatenate(([True], kg[1:] != kg[:-1]))
        return {
            names[a]: int(b) for a, b in zip(kg[first].tolist(), kd[first].tolist(), strict=True)
        }

    # -- documents ----------------------------------------------------------------------

    def metric_doc(self) -> dict[str, Any]:
        gpu = self.metric in GPU_RESOURCES
        return {"resource": self.metric, "label": "GPUs" if gpu else "CPU cores"}

    def topology_doc(self) -> dict[str, Any]:
        """Every domain as columns (compact at 100,000 nodes), the root last."""
        ix, f, health = self.index, self.figures, self.health
        degraded = [health.describe(h) if health.degraded(h) else "" for h in range(ix.root + 1)]
        outside = self.outside_nodes()
        cap, c = self.capacity, self._col
        alloc = cap.node_alloc[outside, c]
        used = cap.node_used[outside, c]
        unhealthy = health.node_flags[outside].any(axis=1)
        tiers: dict[int, set[str]] = {}
        for h, hn in enumerate(ix.hypernodes):
            tiers.setdefault(int(ix.tier[h]), set()).update([hn.tier_name] if hn.tier_name else [])
        return {
            "metric": self.metric_doc(),
            "root": ix.root,
            "rootTier": ix.root_tier,
            "domains": {
                "name": list(ix.names),
                "tier": ix.tier.tolist(),
                "tierName": [h.tier_name or "" for h in ix.hypernodes] + [""],
                "group": [h.group for h in ix.hypernodes] + [""],
                "parent": ix.parent.tolist(),
                "tree": ix.tree_of.tolist(),
                "usable": ix.usable.tolist(),
                "nodes": np.diff(ix.real_ptr).tolist(),  # in the cluster (as tree counts)
                "total": _rounded(f.total),
                "used": _rounded(f.used),
                "unavailable": _rounded(f.unavailable),
                "degraded": degraded,
            },
            "trees": [
                {
                    "name": t.name,
                    "usable": t.usable,
                    "reasons": list(t.reasons),
                    "hyperNodes": len(t.hypernodes),
                    "group": t.group,
                }
                for t in ix.trees
            ],
            # the controller's Volcano copies set aside: which group the picture shows
            "mirrors": {**ix.mirrors.to_dict(), "note": ix.mirrors.note()} if ix.mirrors else None,
            "tiers": [{"tier": t, "names": sorted(n)} for t, n in sorted(tiers.items())],
            "outside": {
                "nodes": len(outside),
                "total": _round(float(alloc.sum()) * self._unit),
                "used": _round(float(used.sum()) * self._unit),
                "unavailable": _round(
                    float(np.where(unhealthy, np.maximum(alloc - used, 0), 0).sum()) * self._unit
                ),
            },
        }

    def resources_doc(self, alloc: IntArray, used: IntArray) -> list[dict[str, Any]]:
        axis = self.capacity.axis
        out = []
        for i, name in enumerate(axis.names):
            if not alloc[i] and not used[i]:
                continue
            scale = int(axis.scale[i])
            out.append(
                {
                    "name": name,
                    "allocatable": amount(int(alloc[i]) * scale, name),
                    "used": amount(int(used[i]) * scale, name),
                    "free": amount(max(int(alloc[i] - used[i]), 0) * scale, name),
                }
            )
        return out

    def hypernode_doc(self, h: int) -> dict[str, Any]:
        """Figures of one domain: resources, nodes by health, gangs inside, its nodes."""
        ix, health, f = self.index, self.health, self.figures
        counts = health.counts[h]
        real = ix.real_nodes[h]
        doc: dict[str, Any] = {
            "name": ix.names[h],
            "index": h,
            "tier": int(ix.tier[h]),
            "path": [ix.names[a] for a in reversed(ix.ancestors(h))],
            "children": [ix.names[k] for k in ix.children[h]],
            "metric": {
                **self.metric_doc(),
                "total": _round(float(f.total[h])),
                "used": _round(float(f.used[h])),
                "unavailable": _round(float(f.unavailable[h])),
                "free": _round(float(f.total[h] - f.used[h] - f.unavailable[h])),
            },
            "resources": self.resources_doc(self.capacity.dom_alloc[h], self.capacity.dom_used[h]),
            "health": {
                "nodes": len(real),
                "healthy": len(real) - int(health.unhealthy_nodes[h]),
                "notReady": int(counts[NodeIssue.NOT_READY]),
                "cordoned": int(counts[NodeIssue.CORDONED]),
                "noExecute": int(counts[NodeIssue.NO_EXECUTE]),
                "detail": health.describe(h),
                "degraded": health.degraded(h),
            },
        }
        if h != ix.root:
            hn = ix.hypernodes[h]
            tree = ix.tree(h)
            doc["tierName"] = hn.tier_name or ""
            doc["group"] = hn.group
            doc["usable"] = bool(ix.usable[h])
            doc["link"] = hn.link.to_dict() if hn.link else None
            doc["conditions"] = [c.to_dict() for c in hn.status.conditions]
            if tree is not None:
                doc["tree"] = {
                    "name": tree.name,
                    "usable": tree.usable,
                    "reasons": list(tree.reasons),
                }
            doc["missingNodes"] = list(ix.missing_nodes[h])
        doc.update(self._gangs_inside(real))
        doc.update(self._node_row(h))
        return doc

    def _gangs_inside(self, real: IntArray) -> dict[str, Any]:
        node, gang, names = self.placements
        inside = np.zeros(len(self.index.node_names), dtype=bool)
        inside[real] = True
        counts = np.bincount(gang[inside[node]], minlength=len(names))
        found = np.flatnonzero(counts)
        top = found[np.lexsort((found, -counts[found]))][:GANG_LIMIT]
        return {
            "gangCount": len(found),
            "gangs": [{"key": names[g], "pods": int(counts[g])} for g in top.tolist()],
        }

    def _node_row(self, h: int) -> dict[str, Any]:
        """The nodes under ``h`` grouped by the leaf holding them, if there are few enough."""
        ix = self.index
        if h == ix.root:
            leaves = [d for d in range(ix.root) if len(ix.direct_nodes[d])]
            outside = self.outside_nodes()
        else:
            leaves = [d for d in self._subtree(h) if len(ix.direct_nodes[d])]
            outside = np.zeros(0, dtype=np.int64)
        listed = sum(len(ix.direct_nodes[d]) for d in leaves) + len(outside)
        if listed > NODE_LIMIT:
            return {"nodesListed": False, "nodeLimit": NODE_LIMIT}
        order: dict[int, int] = {}
        for n in (*(int(n) for d in leaves for n in ix.direct_nodes[d]), *outside.tolist()):
            order.setdefault(n, len(order))
        return {
            "nodesListed": True,
            "nodes": [self.node_brief(n) for n in order],
            "members": [[ix.names[d], [order[int(n)] for n in ix.direct_nodes[d]]] for d in leaves],
            "outside": [order[n] for n in outside.tolist()],
        }

    def _subtree(self, h: int) -> list[int]:
        out, todo = [], [h]
        while todo:
            d = todo.pop()
            out.append(d)
            todo.extend(reversed(self.index.children[d]))
        return out

    def node_brief(self, n: int) -> dict[str, Any]:
        cap, c = self.capacity, self._col
        node = self.nodes[self.index.node_names[n]]
        return {
            "name": node.name,
            "total": _round(int(cap.node_alloc[n, c]) * self._unit),
            "used": _round(int(cap.node_used[n, c]) * self._unit),
            "state": node_state(node),
            "pods": len(self.pods_on[n]),
        }

    def node_doc(self, name: str, pods: Sequence[Pod]) -> dict[str, Any]:
        ix, cap = self.index, self.capacity
        n = ix.node_ix[name]
        node = self.nodes[name]
        return {
            **self.node_brief(n),
            "labels": dict(node.labels),
            "unschedulable": node.unschedulable,
            "conditions": [c.to_dict() for c in node.conditions],
            "taints": [t.to_dict() for t in node.taints],
            "resources": self.resources_doc(cap.node_alloc[n], cap.node_used[n]),
            "domains": [
                {"name": ix.names[d], "tier": int(ix.tier[d])}
                for d in sorted(ix.domains_of(n).tolist(), key=lambda d: int(ix.tier[d]))
                if d != ix.root
            ],
            "leaves": [ix.names[d] for d in ix.leaves_of(name)],
            "podList": [
                {"key": p.key, "gang": gang_of(p), "phase": str(p.phase)}
                for p in sorted(pods, key=lambda p: p.key)
            ],
        }


def amount(milli: int, resource: str) -> str:
    """An amount for a person: bytes in the largest binary unit below 1024 of it (Ti at
    most), others whole with thousands separators (``447,760``), fractions to 3 places."""
    if byte_counted(resource):
        value, unit = milli / 1000, ""
        for suffix in ("Ki", "Mi", "Gi", "Ti"):
            if value < 1024:
                break
            value, unit = value / 1024, suffix
        return f"{value:,.1f}".removesuffix(".0") + unit
    if milli % 1000 == 0:
        return f"{milli // 1000:,}"
    return f"{milli / 1000:,.3f}".rstrip("0")


def _round(x: float) -> float | int:
    """Whole amounts as ints, the rest to 3 decimals (what JSON carries)."""
    r = round(x, 3)
    return int(r) if r == int(r) else r


def _rounded(a: FloatArray) -> list[float | int]:
    return [_round(x) for x in a.tolist()]
