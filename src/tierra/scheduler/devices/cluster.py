"""A cluster's DRA state, and what it means for one pod: its claims, its nodes, its devices.

As kube-scheduler's DynamicResources plugin reads it (PreFilter/Filter): a pod's claim is
named directly or, for a template, by the name the resourceclaim controller recorded in
the pod's status (until then the pod waits); an allocated claim pins the pod to the
claim's node selector and is not allocated again (a claim shared by several pods is
allocated once); the devices in use are those of every allocated claim (admin access
aside, whoever allocated it) and of every allocation tierra made and has not yet seen
come back from the API (``assumed``). The rest is the allocator's.

Mutable on purpose: the Kubernetes edge keeps one and feeds it events; a snapshot builds
one from its objects. The allocator (and its remembered selector results) is rebuilt
only when classes or slices change.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from tierra.api.node import Node
from tierra.api.node_topology import NODE_TOPOLOGY_ANNOTATION
from tierra.api.pod import Pod
from tierra.api.podgroup import PodGroup
from tierra.api.resource import (
    Allocation,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from tierra.scheduler.devices import counts
from tierra.scheduler.devices.allocator import DeviceAllocator
from tierra.scheduler.devices.closest import closest_refusal
from tierra.scheduler.devices.group_claims import group_claim, group_of, reserved_for_pod
from tierra.scheduler.devices.in_use import InUseLedger, Journal
from tierra.scheduler.devices.matrix import Counted, DeviceMatrix, count_claims
from tierra.scheduler.devices.pools import DeviceId, NodeInfo
from tierra.scheduler.devices.refusal import ClaimAllocation, DeviceRefusal
from tierra.topology.arrays import BoolArray
from tierra.topology.inside import InsideIndex

MAX_RESERVED_FOR = 256  # resourceapi.ResourceClaimReservedForMaxSize


# numbers standing for lists of node names in eligibility keys (``_nodes_token``):
# one counter for every DeviceCluster, so a fork's copied keys never meet its own
_NODE_TOKENS = itertools.count(1)


@dataclass(slots=True)
class DeviceCluster:
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # ns/name
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    assumed: dict[str, Allocation] = field(default_factory=dict)  # claim -> our allocation
    # upstream PodGroups that share claims (spec.resourceClaims), ns/name: their pods'
    # matching claims are the group's (group_claims.py)
    groups: dict[str, PodGroup] = field(default_factory=dict)
    generation: int = 0  # bumped on every change: cached eligibility is stale
    device_generation: int = 0  # bumped when classes or slices change: node room is stale
    _allocator: DeviceAllocator | None = None
    _previous: DeviceAllocator | None = field(default=None, repr=False, compare=False)
    # Eligibility per (claims' signature, node rules, nodes) until anything changes:
    # a gang's pods made from one template have equal claims and share the answer.
    _eligible: dict[Hashable, tuple[tuple[str, ...], DeviceRefusal | None]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _eligible_at: int = -1
    _owners: dict[Hashable, list[str]] = field(default_factory=dict, repr=False, compare=False)
    # nodes carrying the node-topology annotation (nvidia-smi, written by discovery):
    # with the slices, the node's inside (tierra.topology.inside)
    annotated: dict[str, Node] = field(default_factory=dict)
    annotation_generation: int = 0
    _inside: InsideIndex | None = field(default=None, repr=False, compare=False)
    _inside_at: tuple[int, int] = (-1, -1)
    _in_use: set[DeviceId] = field(default_factory=set, repr=False, compare=False)
    _in_use_at: int = -1
    _ledger: InUseLedger | None = field(default=None, repr=False, compare=False)  # our own
    # a view's: the journal's place for the set it was handed (``_journal``)
    _shared_journal: Journal | None = field(default=None, repr=False, compare=False)
    _node_names: tuple[object, tuple[str, ...], int] = field(
        default=(None, (), 0), repr=False, compare=False
    )
    _spec_texts: dict[int, tuple[object, str]] = field(
        default_factory=dict, repr=False, compare=False
    )
    # per (nodes' token, device generation): where the nodes a slice names stand
    _device_positions: tuple[object, list[int] | None] = field(
        default=(None, None), repr=False, compare=False
    )
    # the last node mask made (``constraint._marked``): the eligible names it is of,
    # the node index it is over, the mask, how many nodes it leaves out
    mask_memo: tuple[tuple[str, ...], object, BoolArray, int] | None = field(
        default=None, repr=False, compare=False
    )
    # The session's thread reads (and reserves) while the adapter's binder writes.
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False, compare=False)

    @classmethod
    def of(
        cls,
        classes: Iterable[DeviceClass],
        claims: Iterable[ResourceClaim],
        templates: Iterable[ResourceClaimTemplate],
        slices: Iterable[ResourceSlice],
        podgroups: Iterable[PodGroup] = (),
    ) -> DeviceCluster:
        return cls(
            classes={c.meta.name: c for c in classes},
            claims={c.key: c for c in claims},
            templates={f"{t.meta.namespace}/{t.meta.name}": t for t in templates},
            slices={s.meta.name: s for s in slices},
            groups={g.key: g for g in podgroups if g.resource_claims},
        )

    def changed(self, *, devices: bool = False) -> None:
        """Something changed; ``devices``: classes or slices (the allocator is rebuilt)."""
        self.generation += 1
        if devices:
            self.device_generation += 1
            self._previous = self._allocator or self._previous
            self._allocator = None

    @property
    def allocator(self) -> DeviceAllocator:
        if self._allocator is None:
            ordered = [self.slices[k] for k in sorted(self.slices)]
            fresh = DeviceAllocator(dict(self.classes), ordered)
            fresh.inside = lambda name: self.inside().node(name)
            if self._previous is not None:
                fresh.inherit(self._previous)
                self._previous = None
            self._allocator = fresh
        return self._allocator

    def allocation_of(self, key: str) -> Allocation | None:
        claim = self.claims.get(key)
        if claim is not None and claim.allocation is not None:
            return claim.allocation
        return self.assumed.get(key)

    def in_use(self) -> set[DeviceId]:
        """Every device an allocated or assumed claim holds (admin access aside): every
        pod's eligibility and plan reads it, so the ledger (``in_use.py``) brings it up
        to date claim by claim after a change rather than gathering it again."""
        if self._in_use_at == self.generation:
            return self._in_use
        if self._ledger is None:
            self._ledger = InUseLedger()
        self._ledger.sync({*self.claims, *self.assumed}, self.allocation_of)
        self._in_use, self._in_use_at = self._ledger.devices, self.generation
        return self._in_use

    def assume(self, allocations: Sequence[ClaimAllocation]) -> None:
        """Keep the session's allocations of claims not allocated yet as assumed: a
        change, after which the devices in use are the ones before plus theirs (added
        in place rather than gathered again from every claim: a gang's reserve assumes
        pod after pod, and each plan reads the devices in use)."""
        ledger = self._ledger
        current = self._in_use_at == self.generation and ledger is not None
        for a in allocations:
            self.assumed[a.claim] = a.allocation
        self.changed()
        if ledger is None or not current:
            return
        for a in allocations:
            ledger.set(a.claim, self.allocation_of(a.claim))
        self._in_use, self._in_use_at = ledger.devices, self.generation

    def claims_of(self, pod: Pod) -> list[ResourceClaim] | DeviceRefusal:
        out = []
        for c in pod.resource_claims:
            if not c.claim_name:
                reason = (
                    f"waiting for the ResourceClaim of template {c.template_name} "
                    f"(pod claim {c.name}) to be created"
                )
                return DeviceRefusal(f"Pod/{pod.key}", "", reason)
            key = f"{pod.namespace}/{c.claim_name}"
            claim = self.claims.get(key)
            if claim is None:
                return DeviceRefusal(f"ResourceClaim/{key}", "", "not found")
            refs = claim.reserved_for
            if len(refs) >= MAX_RESERVED_FOR and not reserved_for_pod(pod, claim):
                return DeviceRefusal(claim.ref, "", "reserved for the most pods a claim allows")
            out.append(claim)
        return out

    def plan(self, pod: Pod, node: Node | NodeInfo) -> tuple[ClaimAllocation, ...] | DeviceRefusal:
        """The allocations the pod's unallocated claims get on ``node``, or why not."""
        claims = self.claims_of(pod)
        if isinstance(claims, DeviceRefusal):
            return claims
        info = node if isinstance(node, NodeInfo) else NodeInfo(node.name, node.labels)
        todo = []
        for claim in claims:
            allocation = self.allocation_of(claim.key)
            if allocation is None:
                todo.append(claim)
                continue
            terms = allocation.node_selector
            if terms is not None and not any(t.matches(info.name, info.labels) for t in terms):
                reason = f"allocated on other nodes; node {info.name} is not one of them"
                return DeviceRefusal(claim.ref, "", reason)
        return self.allocator.allocate(todo, info, self.in_use())

    def node_devices(self, node: Node | NodeInfo) -> dict[str, int]:
        """The node's devices as room, per class (``devices.tierra.dev/<class>``)."""
        info = node if isinstance(node, NodeInfo) else NodeInfo(node.name, node.labels)
        return counts.node_devices(self.allocator, info)

    def pod_devices(self, pod: Pod) -> dict[str, int]:
        """The devices a pod asks for (pending) or holds (bound), per class. Its
        PodGroup's claims are the gang's, allocated once: no pod counts them."""
        claims = self.claims_of(pod)
        if isinstance(claims, DeviceRefusal):
            return {}
        shared = self.group_claim_keys(pod)
        claims = [c for c in claims if c.key not in shared]
        allocations = {c.key: self.allocation_of(c.key) for c in claims}
        if pod.holds_resources:
            return counts.held_devices(pod, claims, allocations)
        if pod.bound or pod.terminated:
            return {}
        return counts.pending_requests(claims, {k: v is not None for k, v in allocations.items()})

    def group_claim_keys(self, pod: Pod) -> set[str]:
        """The pod's claims (ns/name) that are its PodGroup's."""
        group = group_of(pod, self.groups)
        if group is None:
            return set()
        return {
            f"{pod.namespace}/{c.claim_name}"
            for c in pod.resource_claims
            if c.claim_name and group_claim(pod, group, c)
        }

    def signature(self, pod: Pod) -> Hashable:
        """What of the pod its eligibility depends on: each claim's spec, or where it is
        allocated already (claims differ by name only: equal signatures)."""
        claims = self.claims_of(pod)
        if isinstance(claims, DeviceRefusal):
            return ("refused", claims)
        parts: list[Hashable] = []
        for c in claims:
            allocation = self.allocation_of(c.key)
            parts.append(
                ("allocated", allocation.node_selector)
                if allocation is not None
                else ("spec", self._spec_text(c))
            )
        return tuple(parts)

    def _spec_text(self, claim: ResourceClaim) -> str:
        """``repr`` of the claim's spec, kept per spec object: every pod of a gang asks
        its signature once per mask, and a spec's text was most of it."""
        found = self._spec_texts.get(id(claim.spec))
        if found is not None and found[0] is claim.spec:
            return found[1]
        if len(self._spec_texts) > 2 * len(self.claims) + 1024:
            self._spec_texts.clear()  # specs of claims long gone
        text = repr(claim.spec)
        self._spec_texts[id(claim.spec)] = (claim.spec, text)
        return text

    def eligible(
        self, pod: Pod, nodes: Sequence[Node]
    ) -> tuple[tuple[str, ...], DeviceRefusal | None]:
        """The nodes whose devices can serve the pod's claims, and the first refusal."""
        key = (self._key(pod, nodes), False)
        found = self._remembered(pod, key)
        if found is None:
            found = self._eligible_now(pod, nodes)
            self._remember(pod, key, found)
        return found

    def eligible_unlocked(
        self, pod: Pod, nodes: Sequence[Node], *, empty: bool = False
    ) -> tuple[tuple[str, ...], DeviceRefusal | None]:
        """``eligible`` for the session's thread: the lock is held only to look up and to
        copy the state (a view sharing the allocator), never while the answer is
        computed, so the adapter's event loop is not kept waiting on it. ``empty``: as if
        nothing ran (no device in use but by the pod's own allocated claims)."""
        with self.lock:
            key = (self._key(pod, nodes), empty)
            found = self._remembered(pod, key)
            if found is not None:
                return found
            if not empty:
                self.in_use()  # brought up to date here, where the ledger is kept
            view = self.view() if not empty else self._emptied(pod)
        found = view._eligible_now(pod, nodes)
        with self.lock:
            if self.generation == view.generation:
                self._remember(pod, key, found)
                self._node_names, self._device_positions = view._node_names, view._device_positions
        return found

    def _emptied(self, pod: Pod) -> DeviceCluster:
        """A view where only the pod's own claims keep their allocations."""
        view = self.view()
        own = {f"{pod.namespace}/{c.claim_name}" for c in pod.resource_claims}
        view.claims = {
            k: c if k in own or c.allocation is None else replace(c, allocation=None)
            for k, c in view.claims.items()
        }
        view.assumed = {k: a for k, a in view.assumed.items() if k in own}
        view._in_use, view._in_use_at = set(), -1  # counted again without the others
        view._shared_journal = None
        return view

    def view(self) -> DeviceCluster:
        """A copy of the state's objects that later events do not change (same allocator,
        and the devices in use as long as nothing changes)."""
        journal = self._share_in_use()
        return DeviceCluster(
            classes=dict(self.classes),
            claims=dict(self.claims),
            templates=dict(self.templates),
            slices=dict(self.slices),
            assumed=dict(self.assumed),
            groups=dict(self.groups),
            annotated=dict(self.annotated),
            annotation_generation=self.annotation_generation,
            generation=self.generation,
            device_generation=self.device_generation,
            _allocator=self.allocator,
            _in_use=self._in_use,
            _in_use_at=self._in_use_at,
            _shared_journal=journal,
            _node_names=self._node_names,
            _device_positions=self._device_positions,
        )

    # -- a session's view (``state/extensions.py``: ``Versioned``) --------------------

    def fork(self) -> DeviceCluster:
        """A copy for a session's view, taken when the store is fed while it runs: the
        adapter goes on changing this one. The allocator and what was worked out per
        generation are shared until either side changes."""
        with self.lock:
            twin = DeviceCluster(
                classes=dict(self.classes),
                claims=dict(self.claims),
                templates=dict(self.templates),
                slices=dict(self.slices),
                assumed=dict(self.assumed),
                groups=dict(self.groups),
                annotated=dict(self.annotated),
                annotation_generation=self.annotation_generation,
                generation=self.generation,
                device_generation=self.device_generation,
                _allocator=self._allocator,
                _previous=self._previous,
                _eligible=dict(self._eligible),
                _owners=dict(self._owners),
                _eligible_at=self._eligible_at,
                _inside=self._inside,
                _inside_at=self._inside_at,
                _in_use=self._in_use,
                _in_use_at=self._in_use_at,
                _node_names=self._node_names,
                _device_positions=self._device_positions,
            )
            self._share_in_use()
        return twin

    def replay(self, fork: DeviceCluster, pods: Sequence[Pod]) -> None:
        """The devices the session reserved in ``fork`` for ``pods``' claims, assumed
        here too, where the adapter's binder writes them from; a claim allocated
        meanwhile, or devices gone or taken meanwhile, are left to the binder to plan
        again."""
        with self.lock:
            taken = set(self.in_use())
            present: set[DeviceId] | None = None
            kept = False
            for pod in pods:
                for c in pod.resource_claims:
                    key = f"{pod.namespace}/{c.claim_name}"
                    allocation = fork.assumed.get(key)
                    if allocation is None or self.allocation_of(key) is not None:
                        continue
                    if present is None:
                        present = {
                            (s.driver, s.pool, d.name)
                            for s in self.slices.values()
                            for d in s.devices
                        }
                    ids = {r.device_id for r in allocation.results}
                    held = {r.device_id for r in allocation.results if not r.admin_access}
                    if not ids <= present or held & taken:
                        continue
                    self.assumed[key] = allocation
                    taken |= held
                    kept = True
            if kept:
                self.changed()

    def _share_in_use(self) -> Journal | None:
        """A view or fork reads our set of devices in use: the ledger copies it before
        changing it (theirs is counted afresh, by a ledger of their own, when stale).
        The journal's place for that set, when it is the ledger's and current."""
        ledger = self._ledger
        if ledger is None:
            return None
        ledger.shared = True
        return ledger.tail() if self._journal() is not None else None

    def _journal(self) -> Journal | None:
        """Where the in-use ledger's journal stands for ``_in_use`` (None: unknown)."""
        if self._in_use_at != self.generation:
            return None
        ledger = self._ledger
        if ledger is not None and ledger.devices is self._in_use:
            return ledger.tail()
        return self._shared_journal

    def _key(self, pod: Pod, nodes: Sequence[Node]) -> Hashable:
        return (
            self.signature(pod),
            tuple(sorted(pod.node_selector.items())),
            pod.affinity_terms,
            self._nodes_token(nodes),
        )

    def _nodes_token(self, nodes: Sequence[Node]) -> int:
        """A number standing for the nodes' names in the eligibility key: the same while
        the names are (every pod of a session asks with the store's one list of nodes,
        and a tuple of 10,000 names built and hashed per pod was most of its mask)."""
        seen, names, token = self._node_names
        if seen is nodes and len(names) == len(nodes):
            return token
        fresh = tuple(n.name for n in nodes)
        if fresh != names or not token:
            token = next(_NODE_TOKENS)  # never given twice, whichever DeviceCluster asks
        self._node_names = (nodes, fresh, token)
        return token

    def _remembered(
        self, pod: Pod, key: Hashable
    ) -> tuple[tuple[str, ...], DeviceRefusal | None] | None:
        if self._eligible_at != self.generation:
            self._eligible.clear()
            self._owners.clear()
            self._eligible_at = self.generation
        found = self._eligible.get(key)
        if found is not None and found[1] is not None and not self._names(pod, found[1]):
            # a pod with equal claims: the reason names its own claim in the same place
            mine = _claim_refs(pod)
            theirs = self._owners.get(key, [])
            refusal = found[1]
            if refusal.claim not in theirs or len(theirs) != len(mine):
                return None  # computed again
            ref = mine[theirs.index(refusal.claim)]
            obj = ref if refusal.obj == refusal.claim else refusal.obj
            return found[0], replace(refusal, claim=ref, obj=obj)
        return found

    def _remember(
        self, pod: Pod, key: Hashable, found: tuple[tuple[str, ...], DeviceRefusal | None]
    ) -> None:
        self._eligible[key] = found
        self._owners[key] = _claim_refs(pod)

    def _names(self, pod: Pod, refusal: DeviceRefusal) -> bool:
        refs = _claim_refs(pod)
        return refusal.claim in refs or refusal.claim == f"Pod/{pod.key}"

    def _eligible_now(
        self, pod: Pod, nodes: Sequence[Node]
    ) -> tuple[tuple[str, ...], DeviceRefusal | None]:
        claims = self.claims_of(pod)
        if isinstance(claims, DeviceRefusal):
            return (), claims
        needs = self._needs_devices(claims)
        candidates = self._device_nodes(nodes, needs)
        if pod.node_selector or pod.affinity_terms:
            candidates = [node for node in candidates if _allowed(pod, node)]
        counted = self._counted(claims, needs, nodes)
        names: list[str] = []
        first: DeviceRefusal | None = None
        trusted = False  # counts exact and one full search agreed: the rest by counts
        ix, passing = (counted[0].node_ix, counted[1].passes.tolist()) if counted else ({}, [])
        for node in candidates:
            if counted is not None:
                i = ix.get(node.name)
                if i is None or not passing[i]:
                    continue  # short of devices: a reason is made below only if none fits
                if trusted:
                    names.append(node.name)
                    continue
            result = self.plan(pod, node)
            if isinstance(result, DeviceRefusal):
                if counted is not None and counted[1].exact:
                    return self._eligible_searched(pod, candidates)  # counts were wrong
                first = first or result
            else:
                names.append(node.name)
                trusted = counted is not None and counted[1].exact
        if not names:
            first = closest_refusal(self, pod, claims, candidates, counted) or first
        if not names and first is None:
            first = DeviceRefusal(
                claims[0].ref if claims else f"Pod/{pod.key}", "", "no node has devices"
            )
        return tuple(names), (None if names else first)

    def _counted(
        self, claims: list[ResourceClaim], needs: bool, nodes: Sequence[Node]
    ) -> tuple[DeviceMatrix, Counted] | None:
        """The nodes whose free devices can cover the claims, counted over the matrix."""
        if not needs or any(self.allocation_of(c.key) is not None for c in claims):
            return None
        matrix = self.allocator.matrix(nodes)
        in_use = self.in_use()
        counted = count_claims(matrix, self.allocator, claims, in_use, self._journal())
        return None if counted is None else (matrix, counted)

    def _eligible_searched(
        self, pod: Pod, candidates: Sequence[Node]
    ) -> tuple[tuple[str, ...], DeviceRefusal | None]:
        """The full search on every candidate (the reference the counts stand in for)."""
        names: list[str] = []
        first: DeviceRefusal | None = None
        for node in candidates:
            result = self.plan(pod, node)
            if isinstance(result, DeviceRefusal):
                first = first or result
            else:
                names.append(node.name)
        return tuple(names), (None if names else first)

    def node_cliques(self) -> dict[str, str]:
        """Per node, the NVLink clique its devices report (the node's inside)."""
        return self.inside().cliques()

    @property
    def inside_generation(self) -> tuple[int, int]:
        """Moves whenever a node's inside may have changed (slices, annotations)."""
        return (self.device_generation, self.annotation_generation)

    def inside(self) -> InsideIndex:
        """Every node's inside from the slices and the annotated nodes, kept until
        either changes."""
        at = self.inside_generation
        if self._inside is None or self._inside_at != at:
            with self.lock:
                index = InsideIndex(list(self.slices.values()), list(self.annotated.values()))
            self._inside, self._inside_at = index, at
        return self._inside

    def annotation_changed(self, node: Node) -> bool:
        """The node's node-topology annotation differs from the one kept (``note_node``
        would change something: an adapter then calls it inside ``store.feeding()``)."""
        text = node.meta.annotations.get(NODE_TOPOLOGY_ANNOTATION)
        old = self.annotated.get(node.name)
        if old is None:
            return text is not None
        return old.meta.annotations.get(NODE_TOPOLOGY_ANNOTATION) != text

    def note_node(self, node: Node) -> None:
        """A node as the adapter has it: its node-topology annotation, if any, is part of
        its inside (a change rebuilds the index, not the allocator)."""
        if not self.annotation_changed(node):
            return
        has = NODE_TOPOLOGY_ANNOTATION in node.meta.annotations
        with self.lock:
            if has:
                self.annotated[node.name] = node
            else:
                self.annotated.pop(node.name, None)
            self.annotation_generation += 1
            self.changed()

    def _needs_devices(self, claims: list[ResourceClaim]) -> bool:
        return any(self.allocation_of(c.key) is None for c in claims)

    def _device_nodes(self, nodes: Sequence[Node], needs: bool) -> Sequence[Node]:
        """Of ``nodes``, in their order, those a slice names (all of them when the pod
        needs no devices or a slice selects its nodes): where they stand in the list is
        kept per list of names and slices, so a gang at 100,000 nodes walks the few
        thousand with devices, not every node."""
        if not needs:
            return nodes
        token = self._nodes_token(nodes)
        at, positions = self._device_positions
        if at != (token, self.device_generation):
            local = self._nodes_with_devices()
            positions = (
                None if local is None else [i for i, node in enumerate(nodes) if node.name in local]
            )
            self._device_positions = ((token, self.device_generation), positions)
        return nodes if positions is None else [nodes[i] for i in positions]

    def _nodes_with_devices(self) -> set[str] | None:
        """Nodes named by a slice; None when a slice may serve any node (selector, all)."""
        out: set[str] = set()
        for s in self.slices.values():
            if not s.node_name:
                return None
            out.add(s.node_name)
        return out


def _claim_refs(pod: Pod) -> list[str]:
    return [f"ResourceClaim/{pod.namespace}/{c.claim_name}" for c in pod.resource_claims]


def _allowed(pod: Pod, node: Node) -> bool:
    """The pod's nodeSelector and required node affinity (the other filters stay the core's)."""
    labels = node.labels
    if any(labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    return not pod.affinity_terms or any(t.matches(node.name, labels) for t in pod.affinity_terms)
