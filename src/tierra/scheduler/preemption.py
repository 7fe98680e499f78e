"""Preemption: make room for a higher-priority gang inside one domain.

When a gang fits nowhere, lower-priority running pods may be evicted for it, all inside
one domain its limit allows (Volcano's gangPreempt, confined to a domain):

* victims are running pods of ours (our scheduler names) with a strictly lower
  priority, not bound in this session and not of the gang itself; a queue with
  ``reclaimable: false`` gives pods up only to gangs of its own queue;
* another gang is never left below its ``minMember``: its pods beyond ``minMember`` go
  one at a time, and past that the whole gang goes (wherever it runs) or none of it;
* in each candidate domain, victims are added lowest priority first (then single pods
  before whole gangs, smaller before larger, then name) until the domain's free
  resources cover the gang, then placement is tried; more are added while it fails;
* once the gang fits, victims it does not need are given back: each bundle in turn,
  highest priority first (then the latest added), is dropped from the set if the gang
  still fits without it -- a gang's single pods stay in the set while the rest of that
  gang goes, so no gang is left below ``minMember``;
* the domain whose highest-priority victim is lowest wins (kube-scheduler's first
  rule), then the one needing the fewest victims, then the lowest priority sum, the
  lower tier, the name. Candidates are the allowed domains whose free plus
  evictable resources cover the gang, lowest tier first, at most ``maxDomains`` per tier.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

import numpy as np

from tierra.api.natural import natural_key
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.gang import DEFAULT_QUEUE, Gang
from tierra.scheduler.placer import Outcome, Placer
from tierra.scheduler.state import QUEUE_ANNOTATION, ClusterState, gang_key
from tierra.topology.index import IntArray

MAX_TRIES_PER_DOMAIN = 4


@dataclass(frozen=True, slots=True)
class Victim:
    key: str
    node: int
    vec: IntArray
    priority: int


@dataclass(frozen=True, slots=True)
class Bundle:
    """Pods evicted together: one pod, or a whole gang."""

    victims: tuple[Victim, ...]
    whole: bool
    name: str

    @property
    def priority(self) -> int:
        return max(v.priority for v in self.victims)

    def order(self) -> tuple[object, ...]:
        return (self.priority, self.whole, len(self.victims), natural_key(self.name))


@dataclass(frozen=True, slots=True)
class Plan:
    domain: int
    victims: tuple[Victim, ...]

    def key(self, state: ClusterState) -> tuple[object, ...]:
        ix = state.index
        return (
            max((v.priority for v in self.victims), default=0),
            len(self.victims),
            sum(v.priority for v in self.victims),
            int(ix.tier[self.domain]),
            ix.names[self.domain],
        )


def queue_of(state: ClusterState, key: str) -> str:
    pod = state.pods[key]
    g = gang_key(pod)
    if g is not None and g in state.podgroups:
        return state.podgroups[g].queue
    return pod.meta.annotations.get(QUEUE_ANNOTATION, DEFAULT_QUEUE)


class Preemptor:
    def __init__(
        self,
        state: ClusterState,
        config: SchedulerConfig,
        placer: Placer,
        bound_now: Set[str],
    ) -> None:
        self.state = state
        self.config = config
        self.placer = placer
        self.bound_now = bound_now

    def victims(self, gang: Gang) -> list[Victim]:
        st = self.state
        names = set(self.config.scheduler_names)
        mine = {p.key for p in gang.running}
        out: list[Victim] = []
        for key, node in st.node_of.items():
            if key in mine or key in self.bound_now:
                continue
            pod = st.pods[key]
            if pod.priority >= gang.priority or pod.scheduler_name not in names:
                continue
            q = queue_of(st, key)
            queue = st.queues.get(q)
            if queue is not None and not queue.reclaimable and q != gang.queue:
                continue
            out.append(Victim(key, node, st.vec_of[key], pod.priority))
        return out

    def _bundles(self, victims: list[Victim], inside: np.ndarray) -> list[Bundle]:
        st = self.state
        eligible = {v.key: v for v in victims}
        by_gang: dict[str, list[Victim]] = {}
        bundles: list[Bundle] = []
        for v in victims:
            if not inside[v.node]:
                continue
            g = gang_key(st.pods[v.key])
            if g is None or g not in st.podgroups:
                bundles.append(Bundle((v,), False, v.key))
            else:
                by_gang.setdefault(g, []).append(v)
        for g, here in sorted(by_gang.items()):
            running = [k for k in st.members.get(g, {}) if k in st.node_of]
            surplus = max(0, len(running) - st.podgroups[g].min_member)
            here.sort(key=lambda v: (v.priority, natural_key(v.key)), reverse=False)
            singles = here[:surplus]
            bundles.extend(Bundle((v,), False, v.key) for v in singles)
            if len(here) > surplus and all(k in eligible for k in running):
                taken = {v.key for v in singles}
                rest = tuple(eligible[k] for k in sorted(running) if k not in taken)
                bundles.append(Bundle(rest, True, g))
        bundles.sort(key=Bundle.order)
        return bundles

    def _candidates(self, gang: Gang, total: IntArray, victims: list[Victim]) -> list[int]:
        st = self.state
        ix, lay, cap = st.index, st.layouts, st.capacity
        frame = self.placer.frame(gang)
        if isinstance(frame, str):
            return []
        limit, region = frame.limit, frame.region
        evictable = np.zeros_like(cap.node_used)
        for v in victims:
            evictable[v.node] += v.vec
        out: list[int] = []
        top = limit.highest(ix)
        tiers = lay.tiers_up_to(top)
        if limit.flat:
            tiers = [lay.root_tier]
        for t in tiers:
            tl = lay.by_tier[t]
            lo, hi = lay.slice(t, region)
            doms = tl.domains[lo:hi]
            if len(doms) == 0:
                continue
            if t == lay.root_tier:
                allowed = np.array([limit.root], dtype=bool)
            else:
                allowed = np.array(limit.tree_max, dtype=np.int64)[ix.tree_of[doms]] >= t
            free = cap.dom_alloc[doms] - cap.dom_used[doms]
            extra = np.stack(
                [tl.counts(lo, hi, evictable[:, r]) for r in range(evictable.shape[1])], axis=1
            )
            room = free + extra
            ok = allowed & (room >= total).all(axis=1)
            idx = np.flatnonzero(ok)
            deficit = np.maximum(total - free[idx], 0).sum(axis=1)
            order = np.lexsort((doms[idx], deficit))
            out.extend(int(h) for h in doms[idx][order][: self.config.preemption_max_domains])
        return out

    def _try(self, gang: Gang, h: int, total: IntArray, victims: list[Victim]) -> Plan | None:
        st, txn = self.state, self.placer.txn
        inside = np.zeros(len(st.index.node_names), dtype=bool)
        inside[st.index.real_nodes[h]] = True
        mark = txn.mark()
        chosen: list[Bundle] = []
        tries = 0
        found = False
        for b in self._bundles(victims, inside):
            for v in b.victims:
                txn.evict(v.key, v.node, v.vec)
            chosen.append(b)
            free = st.capacity.dom_alloc[h] - st.capacity.dom_used[h]
            if not (free >= total).all():
                continue
            inner = txn.mark()
            out = self.placer.place_gang(gang, within=h)
            txn.rollback(inner)
            if out.ok:
                found = True
                break
            tries += 1
            if tries >= MAX_TRIES_PER_DOMAIN:
                break
        txn.rollback(mark)
        if not found:
            return None
        kept = self._prune(gang, h, total, chosen)
        return Plan(h, tuple(v for b in kept for v in b.victims))

    def _fits_without(self, gang: Gang, h: int, total: IntArray, bundles: list[Bundle]) -> bool:
        """Whether ``gang`` fits in ``h`` when exactly ``bundles`` are evicted."""
        st, txn = self.state, self.placer.txn
        mark = txn.mark()
        try:
            for b in bundles:
                for v in b.victims:
                    txn.evict(v.key, v.node, v.vec)
            free = st.capacity.dom_alloc[h] - st.capacity.dom_used[h]
            return bool((free >= total).all()) and self.placer.place_gang(gang, within=h).ok
        finally:
            txn.rollback(mark)

    def _prune(self, gang: Gang, h: int, total: IntArray, chosen: list[Bundle]) -> list[Bundle]:
        """``chosen`` without the bundles the gang does not need (see the module doc)."""
        if len(chosen) < 2:
            return chosen
        st = self.state
        kept = list(chosen)
        order = sorted(range(len(chosen)), key=lambda i: (-chosen[i].priority, -i))
        for i in order:
            b = chosen[i]
            if not b.whole:
                owner = gang_key(st.pods[b.victims[0].key])
                if any(k.whole and k.name == owner for k in kept):
                    continue  # the rest of its gang goes: this pod must go too
            trial = [k for k in kept if k is not b]
            if self._fits_without(gang, h, total, trial):
                kept = trial
        return kept

    def preempt(self, gang: Gang) -> tuple[Outcome, Plan | None]:
        """Evict and place inside the transaction, or leave it untouched."""
        victims = self.victims(gang)
        if not victims:
            return Outcome(False), None
        core, _ = self.placer.split(gang)
        if core is None:
            return Outcome(False), None
        whole = self.placer.demand([p for _, pods in core for p in pods])
        if isinstance(whole, str) or whole.count == 0:
            return Outcome(False), None
        trace, self.placer.trace = self.placer.trace, None
        try:
            plans = [
                p
                for h in self._candidates(gang, whole.total, victims)
                if (p := self._try(gang, h, whole.total, victims)) is not None
            ]
        finally:
            self.placer.trace = trace
        if not plans:
            return Outcome(False), None
        best = min(plans, key=lambda p: p.key(self.state))
        txn = self.placer.txn
        mark = txn.mark()
        for v in best.victims:
            txn.evict(v.key, v.node, v.vec)
        out = self.placer.place_gang(gang, within=best.domain)
        if not out.ok:
            txn.rollback(mark)
            return Outcome(False), None
        return out, best
