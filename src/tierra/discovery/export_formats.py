"""One discovered topology, written for every consumer: Kueue, KAI, plain labels, Slurm.

Kueue and KAI see topology only as node labels plus a ``Topology`` object listing the
label keys from the widest level to the narrowest (then ``kubernetes.io/hostname``).
tierra writes one label per tier, ``topology.tierra.dev/tier-<k>`` (prefixed by the
topology's name when a snapshot holds several), whose value is the HyperNode holding the
node at that tier. Trees are grouped into topologies by the
``topology.tierra.dev/topology`` label of their HyperNodes (a tree without it is its own
topology). Where a node's chain skips a tier (a tier-3 HyperNode directly above a tier-1
one), the skipped level takes the value of the highest HyperNode below it, so the
domain at that level is exactly what tierra means; a node in a shallower tree repeats
its root at the levels above. Label values longer than 63 characters are shortened with
a hash. KAI's level ``alias`` is the tier name when every HyperNode of the tier agrees.

Slurm: ``topology.conf`` for one topology (tree, or block if it was read from blocks),
``topology.yaml`` for any number.

A HyperNode is (API group, name). Every format here reads the topology index, which sets
the controller's Volcano mirrors aside and calls a name both groups hold ``group/name``
(as a label value ``topology.volcano.sh-rack-a``: two domains stay two).
``in_one_group`` is for writing HyperNodes themselves into one group (``tierra export
volcano|tierra``): there a name both groups hold would be one object twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tierra.api.hypernode import GROUPS, HyperNode, MemberType
from tierra.api.node import Node
from tierra.discovery import naming, slurm
from tierra.discovery.labels import HOSTNAME
from tierra.discovery.result import TOPOLOGY_LABEL
from tierra.errors import InputError
from tierra.topology.index import TopologyIndex
from tierra.topology.mirrors import Mirrors, split_mirrors

LABEL_PREFIX = "topology.tierra.dev/"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
KAI_API = "kai.scheduler/v1alpha1"
Manifest = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class LabelledTopology:
    """One topology as labels: its level keys (widest first) and each node's values."""

    name: str
    keys: tuple[str, ...]
    aliases: tuple[str | None, ...]
    labels: Mapping[str, Mapping[str, str]]  # node -> key -> value


def _groups(index: TopologyIndex) -> dict[str, list[int]]:
    """Topology name -> tree ids (usable trees only)."""
    out: dict[str, list[int]] = defaultdict(list)
    for t in index.trees:
        if not t.usable:
            continue
        hns = [index.hypernodes[h] for h in t.hypernodes]
        name = next(
            (h.meta.labels[TOPOLOGY_LABEL] for h in hns if TOPOLOGY_LABEL in h.meta.labels), t.name
        )
        out[name].append(t.id)
    return dict(sorted(out.items()))


def labelled_topologies(
    hypernodes: Sequence[HyperNode], nodes: Sequence[Node] = ()
) -> list[LabelledTopology]:
    """Every topology in ``hypernodes`` as per-node label values (see the module docstring)."""
    index = TopologyIndex.build(nodes, hypernodes)
    groups = _groups(index)
    several = len(groups) > 1
    out: list[LabelledTopology] = []
    for name, tree_ids in groups.items():
        members = [h for t in tree_ids for h in index.trees[t].hypernodes]
        top = max(int(index.tier[h]) for h in members)
        stem = f"{naming.label_value(name)[:40].rstrip('-._')}-" if several else ""
        keys = tuple(f"{LABEL_PREFIX}{stem}tier-{k}" for k in range(top, 0, -1))
        names_by_tier: dict[int, set[str]] = defaultdict(set)
        for h in members:
            tn = index.hypernodes[h].tier_name
            names_by_tier[int(index.tier[h])].add(tn or "")
        aliases = tuple(
            (next(iter(names_by_tier[k])) or None) if len(names_by_tier[k]) == 1 else None
            for k in range(top, 0, -1)
        )
        member_set = set(members)
        labels: dict[str, dict[str, str]] = {}
        for h in members:
            for node in direct_members(index, h):
                if node in labels:
                    raise InputError(
                        f"node {node} is in two lowest HyperNodes of topology {name}; "
                        "fix the topology first (tierra validate)"
                    )
                chain = [a for a in index.ancestors(h) if a in member_set]
                values: dict[str, str] = {}
                for k, key in zip(range(top, 0, -1), keys, strict=True):
                    fitting = [a for a in chain if int(index.tier[a]) <= k]
                    pick = fitting[-1] if fitting else chain[0]
                    values[key] = naming.label_value(index.names[pick])
                labels[node] = values
        out.append(LabelledTopology(name, keys, aliases, labels))
    return out


def node_label_patches(topologies: Sequence[LabelledTopology]) -> list[Manifest]:
    merged: dict[str, dict[str, str]] = defaultdict(dict)
    for t in topologies:
        for node, values in t.labels.items():
            merged[node].update(values)
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": n, "labels": dict(sorted(v.items()))},
        }
        for n, v in sorted(merged.items())
    ]


def kueue_topology(t: LabelledTopology) -> Manifest:
    levels = [{"nodeLabel": k} for k in (*t.keys, HOSTNAME)]
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": naming.clean(t.name)},
        "spec": {"levels": levels},
    }


def kai_topology(t: LabelledTopology) -> Manifest:
    levels: list[dict[str, str]] = []
    used: set[str] = set()
    for key, alias in zip((*t.keys, HOSTNAME), (*t.aliases, None), strict=True):
        level = {"nodeLabel": key}
        # KAI: aliases are unique and never equal a label key.
        if alias and alias not in used and "/" not in alias:
            level["alias"] = alias
            used.add(alias)
        levels.append(level)
    return {
        "apiVersion": KAI_API,
        "kind": "Topology",
        "metadata": {"name": naming.clean(t.name)},
        "spec": {"levels": levels},
    }


def export_kueue(hypernodes: Sequence[HyperNode], nodes: Sequence[Node] = ()) -> list[Manifest]:
    tops = labelled_topologies(hypernodes, nodes)
    return [*(kueue_topology(t) for t in tops), *node_label_patches(tops)]


def export_kai(hypernodes: Sequence[HyperNode], nodes: Sequence[Node] = ()) -> list[Manifest]:
    tops = labelled_topologies(hypernodes, nodes)
    return [*(kai_topology(t) for t in tops), *node_label_patches(tops)]


def export_labels(hypernodes: Sequence[HyperNode], nodes: Sequence[Node] = ()) -> list[Manifest]:
    return node_label_patches(labelled_topologies(hypernodes, nodes))


def in_one_group(hypernodes: Sequence[HyperNode], group: str) -> tuple[list[HyperNode], Mirrors]:
    """The HyperNodes to write as ``group``'s (by name) and the mirrors set aside.

    The controller's Volcano copies go (their tierra twins are the same tree, written
    once, with link and health). Two HyperNodes of one name in both groups, neither a
    mirror, are two objects that one group cannot hold: ``InputError`` naming them, and
    how to write one group's alone."""
    kept, mirrors = split_mirrors(hypernodes)
    count: dict[str, int] = defaultdict(int)
    for h in kept:
        count[h.name] += 1
    both = sorted(name for name, n in count.items() if n > 1)
    if both:
        names = ", ".join(both[:5]) + (f" and {len(both) - 5} more" if len(both) > 5 else "")
        raise InputError(
            f"{GROUPS[0]} and {GROUPS[1]} both hold HyperNodes named {names}: two HyperNodes "
            "per name (not the controller's mirror: no common managed-by label), and as "
            f"{group} objects each name would be written twice; write one group's: "
            f"--group {GROUPS[0]} or --group {GROUPS[1]}"
        )
    return sorted(kept, key=lambda h: h.name), mirrors


def slurm_topologies(
    hypernodes: Sequence[HyperNode], nodes: Sequence[Node] = ()
) -> list[slurm.Topology]:
    index = TopologyIndex.build(nodes, hypernodes)
    direct = {index.keys[h]: direct_members(index, h) for h in range(len(index.hypernodes))}
    out = []
    for name, tree_ids in _groups(index).items():
        hns = [index.hypernodes[h] for t in tree_ids for h in index.trees[t].hypernodes]
        topo_name = next((slurm.topology_key(h) for h in hns if slurm.topology_key(h)), name)
        out.append(slurm.to_topology(slurm.resolve_for_export(hns, direct), topo_name))
    return out


def direct_members(index: TopologyIndex, h: int) -> list[str]:
    """Nodes a HyperNode names itself: resolved ones, and exact names with no Node object.

    An exported topology is often written from a HyperNode file alone (no Nodes); the
    exact members are then all it has, and they belong in the output.
    """
    out = [index.node_names[n] for n in index.direct_nodes[h].tolist()]
    known = set(index.node_ix)
    out += [
        m.selector.exact
        for m in index.hypernodes[h].members
        if m.type is MemberType.NODE
        and m.selector.exact is not None
        and m.selector.exact not in known
    ]
    return out


def export_slurm_conf(hypernodes: Sequence[HyperNode], nodes: Sequence[Node] = ()) -> str:
    topos = slurm_topologies(hypernodes, nodes)
    if len(topos) != 1:
        raise InputError(
            f"topology.conf holds one topology and the input has {len(topos)}"
            f" ({', '.join(t.name for t in topos) or 'none'}); use slurm-yaml"
        )
    return slurm.render_conf(topos[0])


def export_slurm_yaml(hypernodes: Sequence[HyperNode], nodes: Sequence[Node] = ()) -> str:
    topos = slurm_topologies(hypernodes, nodes)
    if not topos:
        raise InputError("no usable HyperNode trees to write")
    return slurm.render_yaml(topos)
