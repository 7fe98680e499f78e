"""The pod rules as constraints of the session's protocol, one per kube-scheduler filter.

Each brings its evaluator (``host_ports``, ``inter_pod_affinity``, ``topology_spread``,
``volumes``) into a session at three points:

* ``node_mask``, once per pod shape when the gang's plan is made: the evaluator against
  every placed pod, the gangs this session kept included (the store holds them, and
  the ``RulesBook`` follows the store). Its refusals are counted only over the nodes
  the built-in node filter allowed, each node by its first refusing filter, so the
  reason reads as kube-scheduler's does ("2 node(s) didn't match pod anti-affinity
  rules").
* ``node_caps``, whenever counts are taken: what the gang's own pods placed in this
  attempt (``cycle.overlay.assigned``) change -- their ports, their anti-affinity
  both ways, their spread counts -- and, for a shape whose pods conflict with each
  other on one node (one host port, anti-affinity by a per-node key), one per node.
  Placed pods' anti-affinity against pods *without* rules (the symmetric direction) is
  applied here too, for every pod of the shape.
* ``mask_key``: a pod whose rules select itself (replicas kept apart, together or
  spread) is a shape of its own, so a gang's such pods are placed one after another,
  each against the ones before it in the overlay -- kube-scheduler's pod-by-pod
  decision, at any topology key, all or nothing for the gang.

``VolumeBinding`` also ``reserve``s: the PVs it picks for unbound WaitForFirstConsumer
claims, undone with the attempt; the actions (bind a PV, or provision by the
selected-node annotation) wait in the book for the adapter (``RulesBook.actions``). A
pod left without a PV whose class cannot provision refuses the attempt (all or nothing;
never a selected node no provisioner answers). So that this is rare, its ``node_caps``
give each shape only the nodes where PVs remain once the attempt's earlier pods took
theirs (in the order ``reserve`` takes them), and its ``candidates`` set aside domains
reaching fewer free PVs than the gang has claims only a PV can take.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from tierra.api.pod import Pod
from tierra.scheduler.constraints.eligibility import constraint_key
from tierra.scheduler.constraints.protocol import (
    Ask,
    Candidacy,
    Constraint,
    Cycle,
    NodeMask,
    Refusal,
)
from tierra.scheduler.podrules import (
    contract,
    host_ports,
    inter_pod_affinity,
    topology_spread,
    volumes,
)
from tierra.scheduler.podrules.book import READS, Reads, RulesBook, book_of, reads
from tierra.scheduler.podrules.state import NodeTable, Placed, PodIndex
from tierra.scheduler.podrules.verdict import Verdict, allowed, first_refusals
from tierra.topology.arrays import BoolArray
from tierra.topology.index import IntArray

if TYPE_CHECKING:
    from tierra.scheduler.placement.demand import Shape
    from tierra.scheduler.state.store import ClusterStore
    from tierra.scheduler.state.transaction import Transaction

UNCAPPED = 1 << 30
POOL = "volume-binding:pool"  # the refusal of domains short of local PVs, and its memo
ONE_EACH = "node(s) already holding a pod of the gang that its rules keep apart"
SYNCED = "podrules:synced"  # ``attempt_placed``'s last look, in ``Cycle.data``


def rules_key(pod: Pod) -> Hashable:
    """What a rule's mask reads of a pod: its rules, namespace and labels (None: none).

    A pod whose own rules select itself (replicas kept apart, together or spread) is
    a shape alone: shapes are placed one after another, each seeing the ones before in
    the attempt's overlay, so such pods are decided one by one, as kube-scheduler does."""
    if pod.rules is None:
        return None
    key = (pod.rules, pod.namespace, tuple(sorted(pod.meta.labels.items())))
    return (*key, pod.key) if _selects_itself(pod) else key


def _selects_itself(pod: Pod) -> bool:
    """Whether a rule of the pod -- required or preferred, a filter or a score -- reads
    pods like itself, so each of its replicas sees the ones placed before it."""
    rules = pod.rules
    if rules is None:
        return False
    labels = pod.meta.labels
    terms = (
        *rules.affinity,
        *rules.anti_affinity,
        *rules.preferred_affinity,
        *rules.preferred_anti_affinity,
    )
    return any(t.matches_pod(labels) for t in terms) or any(c.counts(labels) for c in rules.spread)


def _mask(store: ClusterStore, pod: Pod, verdicts: Sequence[Verdict]) -> NodeMask:
    count = len(store.index.node_names)
    within = store.filter.for_pod(pod).mask
    refused = first_refusals(verdicts, within)
    return NodeMask(allowed(verdicts, count), tuple((r.reason, r.nodes) for r in refused))


def _overlay(cycle: Cycle, book: RulesBook, shape: Shape | None = None) -> list[tuple[Pod, int]]:
    """This attempt's pods placed so far (positions in the store's index), but the
    shape's own (a pod is not its own neighbour)."""
    own = {p.key for p in shape.pods} if shape is not None else set()
    return [(p, n) for p, n, _ in cycle.overlay.assigned if p.key not in own]


def _others_placed(cycle: Cycle, shape: Shape) -> bool:
    """Whether this attempt placed any pod but the shape's own (a pod is not its own
    neighbour); stops at the first, so a gang placed pod by pod does not walk the
    whole overlay for it at every step."""
    own = {p.key for p in shape.pods}
    return any(p.key not in own for p, _, _ in cycle.overlay.assigned)


def attempt_placed(book: RulesBook, cycle: Cycle, names: Sequence[str]) -> PodIndex:
    """The placed pods with this attempt's among them, for an evaluation to read.

    The attempt's pods are pending in the store, so the book holds none of them
    otherwise. Each is added the first time an evaluation reads the index after it is
    placed, and stays: its removal goes on the attempt's undo log after its placement
    (``Transaction.on_undo``), so a rollback takes it out with the pod (and a later
    evaluation adds it again if a rollback to a mark took out only the removal), while
    a kept gang leaves it in -- the store then tells the book the pod is placed, as it
    is. A gang whose pods select themselves is placed one pod at a time with an
    evaluation between each two, so adding each pod once per evaluation (and removing
    it after) cost the square of the gang's size; this costs each pod one add. The pods
    are added in the attempt's order after the store's, as they always were, so what
    the index iterates in insertion order is unchanged."""
    placed = book.placed
    entries = placed.entries
    overlay = cycle.overlay
    if cycle.data.get(SYNCED) == _synced(placed, overlay):
        return placed  # nothing placed, undone or indexed since the last look
    for pod, n, _ in overlay.assigned:
        key = pod.key
        if key not in entries:
            placed.add(pod, names[n])
            overlay.on_undo(_unplace(placed, key, entries[key]))
    cycle.data[SYNCED] = _synced(placed, overlay)
    return placed


def _synced(placed: PodIndex, overlay: Transaction) -> tuple[int, int, int, int]:
    """What ``attempt_placed`` left behind: the index and its version, and how far the
    overlay had gone (``touched`` grows with every placement and every undo)."""
    return (id(placed), placed.version, len(overlay.touched), len(overlay.assigned))


def _unplace(placed: PodIndex, key: str, entry: Placed) -> Callable[[], None]:
    def undo() -> None:
        if placed.entries.get(key) is entry:  # never a pod the store placed since
            placed.remove(key)

    return undo


class _Rule(Constraint):
    """What the four filters share: the mask per shape and the caps per attempt."""

    __slots__ = ()
    filter_name = ""

    def mask_key(self, pod: Pod) -> Hashable:
        return rules_key(pod)

    def applies(self, cycle: Cycle) -> bool:
        """Only for a gang whose pods have rules (``node_mask``, asked regardless, reads
        the pod's own): its caps, candidacy and reservations read the pod's rules."""
        return bool((cycle.data.get(READS) or reads(cycle)).own)

    def alone_alike(self, cycle: Cycle) -> bool:
        """Alike while no pod has rules (the book asleep): a pod without rules is then
        neither masked nor capped by any."""
        return not book_of(cycle.store).awake

    def verdicts(
        self, pod: Pod, table: NodeTable, placed: PodIndex, book: RulesBook
    ) -> Sequence[Verdict]:
        raise NotImplementedError

    def node_mask(self, store: ClusterStore, pod: Pod) -> NodeMask | None:
        if pod.rules is None:
            return None
        book = book_of(store)
        found = self.verdicts(pod, book.nodes(store), book.placed, book)
        return _mask(store, pod, found) if found else None

    def _shared_mask(self, store: ClusterStore, pod: Pod) -> NodeMask | None:
        """``node_mask`` once for a gang's replicas: a pod whose rules select itself is a
        shape of its own (``rules_key``), yet while it is not placed its mask reads only
        its rules, namespace, labels and node constraints -- not its name -- so replicas
        share the first one's, while the table, the placed pods and the node filter's
        mask for them are the same."""
        if pod.rules is None:
            return None
        book = book_of(store)
        table, placed = book.nodes(store), book.placed
        if pod.key in placed.entries:  # placed itself: its own counts leave it out
            return _Rule.node_mask(self, store, pod)
        at = book.masks_at
        if at is None or at[0] is not table or at[1] != placed.version:
            book.masks.clear()
            book.masks_at = (table, placed.version)
        within = store.filter.for_pod(pod)
        labels = tuple(sorted(pod.meta.labels.items()))
        key = (self.name, pod.rules, pod.namespace, labels, constraint_key(pod))
        memo = book.masks.get(key)
        if memo is not None and memo[0] is within:
            return memo[1]
        found = self.verdicts(pod, table, placed, book)
        mask = _mask(store, pod, found) if found else None
        book.masks[key] = (within, mask)
        return mask

    def cap_refusal(self, cycle: Cycle, capped: int) -> Refusal | None:
        why = cycle.data.get(f"{self.name}:why", ONE_EACH)
        if callable(why):
            why = why()
        return Refusal(self, "per-node cap", capped, (("reason", why),))

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        """kube-scheduler's phrase, its plugin and the pod field behind it, so a gang the
        rule keeps out of every allowed domain is told which of its fields did."""
        why = str(refusal.value("reason"))
        return f"{refusal.count} {why} ({self.filter_name}: {self.field_of(why)})"

    def field_of(self, reason: str) -> str:
        """The pod field a reason of this filter comes from."""
        return self.filter_name

    def note(self, cycle: Cycle, refused: BoolArray, reason: str | Callable[[], str]) -> None:
        """Remember why this attempt's caps refused nodes, for ``cap_refusal`` (a callable:
        worked out only if a refusal is told)."""
        cycle.data[f"{self.name}:why"] = reason if refused.any() else ONE_EACH

    def _caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        """Caps for ``shape`` over every node, memoized per attempt state."""
        book = book_of(cycle.store)
        if not book.awake:
            return None
        memo: dict[tuple[int, int], IntArray | None] = cycle.data.setdefault(self.name, {})
        # the overlay's version: ``touched`` grows with every placement and every undo, so
        # a later attempt that placed as many pods elsewhere is not mistaken for this one
        key = (id(shape), len(cycle.overlay.touched))
        if key not in memo:
            memo[key] = self.full_caps(cycle, shape, book)
        full = memo[key]
        return None if full is None else full[nodes]

    def full_caps(self, cycle: Cycle, shape: Shape, book: RulesBook) -> IntArray | None:
        return None


def _caps_from(refused: BoolArray, one_each: bool) -> IntArray:
    caps: IntArray = np.where(refused, 0, 1 if one_each else UNCAPPED).astype(np.int64, copy=False)
    return caps


@dataclass(frozen=True, slots=True)
class NodePorts(_Rule):
    name = "node-ports"

    filter_name = host_ports.NAME

    def field_of(self, reason: str) -> str:
        return contract.HOST_PORTS

    def verdicts(
        self, pod: Pod, table: NodeTable, placed: PodIndex, book: RulesBook
    ) -> Sequence[Verdict]:
        v = host_ports.evaluate(pod, table, placed)
        return () if v is None else (v,)

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        return self._caps(cycle, shape, nodes)

    def full_caps(self, cycle: Cycle, shape: Shape, book: RulesBook) -> IntArray | None:
        pod = shape.pods[0]
        wanted = pod.rules.host_ports if pod.rules is not None else ()
        if not wanted:
            return None
        refused = np.zeros(len(cycle.store.index.node_names), dtype=bool)
        for other, n in _overlay(cycle, book):
            theirs = other.rules.host_ports if other.rules is not None else ()
            if any(w.conflicts(p) for w in wanted for p in theirs):
                refused[n] = True
        self.note(cycle, refused, host_ports.REASON)
        return _caps_from(refused, one_each=True)  # a shape's pods share their ports


@dataclass(frozen=True, slots=True)
class InterPodAffinity(_Rule):
    name = "inter-pod-affinity"
    filter_name = inter_pod_affinity.NAME

    def field_of(self, reason: str) -> str:
        if reason == inter_pod_affinity.AFFINITY:
            return contract.POD_AFFINITY
        if reason == inter_pod_affinity.EXISTING_ANTI_AFFINITY:
            return f"placed pods' {contract.POD_ANTI_AFFINITY}"
        return contract.POD_ANTI_AFFINITY

    def verdicts(
        self, pod: Pod, table: NodeTable, placed: PodIndex, book: RulesBook
    ) -> Sequence[Verdict]:
        v = inter_pod_affinity.evaluate(pod, table, placed)
        return () if v is None else (v,)

    def node_mask(self, store: ClusterStore, pod: Pod) -> NodeMask | None:
        return self._shared_mask(store, pod)

    def applies(self, cycle: Cycle) -> bool:
        """Also for a gang without rules while placed pods hold required anti-affinity:
        their terms refuse its pods (the symmetric direction, ``full_caps``)."""
        found: Reads = cycle.data.get(READS) or reads(cycle)
        return found.own or found.anti

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        return self._caps(cycle, shape, nodes)

    def full_caps(self, cycle: Cycle, shape: Shape, book: RulesBook) -> IntArray | None:
        """This attempt's pods against the shape (both ways), and placed pods' terms
        against a shape of pods without rules (their masks did not look)."""
        others = _others_placed(cycle, shape)
        if not others and (shape.pods[0].rules is not None or not book.placed.anti_terms):
            return None  # the mask said it all: no attempt pods, no symmetric terms
        table = book.nodes(cycle.store)
        refused = np.zeros(len(table), dtype=bool)
        seen: set[Hashable] = set()
        reasons: list[Verdict] = []
        placed = attempt_placed(book, cycle, table.names)
        for pod in shape.pods:
            key = (pod.namespace, tuple(sorted(pod.meta.labels.items())))
            if key in seen:
                continue
            seen.add(key)
            v = inter_pod_affinity.evaluate(pod, table, placed)
            if v is not None:
                refused |= ~v.mask
                reasons.append(v)
        self.note(cycle, refused, _top_reason(reasons, shape.eligibility.mask))
        return _caps_from(refused, one_each=False)


def _top_reason(verdicts: list[Verdict], within: BoolArray) -> Callable[[], str]:
    """The reason refusing the most of ``within`` (counted only if a refusal is told)."""

    def top() -> str:
        found = first_refusals(verdicts, within)
        return max(found, key=lambda r: r.nodes).reason if found else ONE_EACH

    return top


@dataclass(frozen=True, slots=True)
class PodTopologySpread(_Rule):
    name = "pod-topology-spread"
    filter_name = topology_spread.NAME

    def field_of(self, reason: str) -> str:
        return contract.SPREAD

    def verdicts(
        self, pod: Pod, table: NodeTable, placed: PodIndex, book: RulesBook
    ) -> Sequence[Verdict]:
        v = topology_spread.evaluate(pod, table, placed)
        return () if v is None else (v,)

    def node_mask(self, store: ClusterStore, pod: Pod) -> NodeMask | None:
        return self._shared_mask(store, pod)

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        return self._caps(cycle, shape, nodes)

    def full_caps(self, cycle: Cycle, shape: Shape, book: RulesBook) -> IntArray | None:
        pod = shape.pods[0]
        hard = pod.rules.hard_spread if pod.rules is not None else ()
        if not hard or not _others_placed(cycle, shape):
            return None  # no pods of the attempt yet: the shape's mask said it all
        table = book.nodes(cycle.store)
        v = topology_spread.evaluate(pod, table, attempt_placed(book, cycle, table.names))
        caps = np.where(v.mask if v is not None else True, UNCAPPED, 0).astype(np.int64)
        self.note(cycle, caps == 0, topology_spread.NOT_MATCH)
        return caps


@dataclass(frozen=True, slots=True)
class VolumeBinding(_Rule):
    """VolumeBinding with VolumeZone, NodeVolumeLimits and VolumeRestrictions."""

    name = "volume-binding"
    filter_name = volumes.BINDING

    def field_of(self, reason: str) -> str:
        return contract.CLAIMS

    def verdicts(
        self, pod: Pod, table: NodeTable, placed: PodIndex, book: RulesBook
    ) -> Sequence[Verdict]:
        return volumes.evaluate(pod, table, placed, book.storage) or ()

    def node_mask(self, store: ClusterStore, pod: Pod) -> NodeMask | None:
        """The filter's mask; with every node empty (explain's "can never fit") only a
        bound PV's node affinity and zone still refuse: PVs not made yet, or held by
        others, are a wait."""
        if pod.rules is None:
            return None
        book = book_of(store)
        found = self.verdicts(pod, book.nodes(store), book.placed, book)
        if not found:
            return None
        mask = _mask(store, pod, found)
        if mask.mask.all():
            return mask
        lasting = [volumes.lasting_codes(v) for v in found]

        def empty() -> BoolArray:
            out = np.ones(len(mask.mask), dtype=bool)
            for v, codes in zip(found, lasting, strict=True):
                out &= ~np.isin(v.codes, codes)
            return out

        return replace(mask, empty=empty)

    def candidates(self, cycle: Cycle, ask: Ask, tier: int, domains: IntArray) -> Candidacy | None:
        """Domains reaching fewer free PVs than the gang has claims that only a PV can
        take (a class without a provisioner) are no candidates: a rack whose local PVs
        ran out is not tried, and explain says how many it lacks."""
        holds = self._pool_holds(cycle, ask)
        if holds is None or not len(domains):
            return None
        need, every = holds
        here = every[domains]
        kept = here >= need
        if kept.all():
            return None
        values = (("need", need), ("best", int(here.max())))
        return Candidacy(excluded=kept, refusal=Refusal(self, POOL, int((~kept).sum()), values))

    def _pool_holds(self, cycle: Cycle, ask: Ask) -> tuple[int, IntArray] | None:
        """(claims needing a PV, free PVs reaching each domain), once per gang and ask."""
        book = book_of(cycle.store)
        if not book.awake:
            return None
        memo: dict[int, tuple[int, IntArray] | None] = cycle.data.setdefault(POOL, {})
        key = id(ask.demand)
        if key not in memo:
            pods = [p for s in ask.demand.shapes for p in s.pods]
            found = volumes.local_pool(pods, book.nodes(cycle.store), book.storage)
            memo[key] = None if found is None else (found[0], _domain_counts(cycle, found[1]))
        return memo[key]

    def describe(self, refusal: Refusal, store: ClusterStore, domain: int | None = None) -> str:
        if refusal.what != POOL:
            return _Rule.describe(self, refusal, store, domain)
        return (
            f"{refusal.count} domain(s) reach fewer free PersistentVolumes than the gang's "
            f"{refusal.value('need')} claims of classes without a provisioner (the most: "
            f"{refusal.value('best')}; {self.filter_name}: {contract.CLAIMS})"
        )

    def node_caps(self, cycle: Cycle, shape: Shape, nodes: IntArray) -> IntArray | None:
        return self._caps(cycle, shape, nodes)

    def full_caps(self, cycle: Cycle, shape: Shape, book: RulesBook) -> IntArray | None:
        """No node where the PVs the attempt's earlier pods will take (``reserve``, in
        placement order) leave the shape's claims none: a rack's local PVs run out before
        its nodes do, and the gang must then go where every member finds one."""
        before = _overlay(cycle, book, shape)
        if not before:
            return None  # the shape's mask said it all
        table = book.nodes(cycle.store)
        taken = cycle.data.setdefault(f"{self.name}:taken", volumes.Taken())
        ok = volumes.bindable_after(shape.pods[0], before, table, book.storage, taken)
        if ok is None:
            return None
        self.note(cycle, ~ok, volumes.BIND_CONFLICT)
        return _caps_from(~ok, one_each=False)

    def reserve(self, cycle: Cycle, placed: Sequence[tuple[Pod, int]]) -> Refusal | None:
        """Each pod's PVs, in placement order; a pod left without one (its class cannot
        provision) refuses the attempt, so the gang is placed all or nothing."""
        book = book_of(cycle.store)
        if not book.awake:
            return None
        table = book.nodes(cycle.store)
        for pod, n in placed:
            if pod.rules is None or not pod.rules.claims:
                continue
            actions = volumes.decide(pod, n, table, book.storage)
            if actions is None:
                why = (("reason", volumes.BIND_CONFLICT),)
                return Refusal(self, "no persistent volume", 1, why)
            if actions:
                book.actions[pod.key] = actions
                cycle.overlay.on_undo(_undo(book, pod.key, [a.volume for a in actions]))
        return None


def _domain_counts(cycle: Cycle, reach: BoolArray) -> IntArray:
    """Per domain of the index: how many rows of ``reach`` (PVs over nodes) reach any of
    its nodes."""
    ix = cycle.store.index
    ptr, idx = ix.real_ptr, ix.real_idx
    out = np.zeros(len(ptr) - 1, dtype=np.int64)
    if not len(idx) or not len(reach):
        return out
    starts = np.minimum(ptr[:-1], len(idx) - 1)
    nonempty = ptr[1:] > ptr[:-1]
    touched = np.maximum.reduceat(reach[:, idx].astype(np.int8), starts, axis=1) > 0
    return np.asarray((touched & nonempty).sum(axis=0), dtype=np.int64)


def _undo(book: RulesBook, key: str, pvs: list[str]) -> Callable[[], None]:
    def undo() -> None:
        book.actions.pop(key, None)
        for pv in pvs:
            if pv:
                book.storage.release(pv)

    return undo


CONSTRAINTS: tuple[Constraint, ...] = (
    NodePorts(),
    InterPodAffinity(),
    PodTopologySpread(),
    VolumeBinding(),
)
