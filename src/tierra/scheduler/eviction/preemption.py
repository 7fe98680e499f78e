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
from dataclasses import dataclass, replace

import numpy as np

from tierra.api.natural import natural_key
from tierra.api.pod import Pod
from tierra.scheduler.config import SchedulerConfig
from tierra.scheduler.gang import Gang
from tierra.scheduler.kueue_pod_groups import Specs
from tierra.scheduler.placement.allocate import Allocator
from tierra.scheduler.placement.plan import GangPlan
from tierra.scheduler.queueing.quota import Budget
from tierra.scheduler.state.store import ClusterStore, gang_key, solo_queue
from tierra.scheduler.status import Code, Status
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
class Choice:
    """A domain to preempt in, and the victims that make room there."""

    domain: int
    victims: tuple[Victim, ...]

    def key(self, cache: ClusterStore) -> tuple[object, ...]:
        ix = cache.index
        return (
            max((v.priority for v in self.victims), default=0),
            len(self.victims),
            sum(v.priority for v in self.victims),
            int(ix.tier[self.domain]),
            ix.names[self.domain],
        )


def queue_of(cache: ClusterStore, key: str) -> str:
    pod = cache.pods[key]
    g = gang_key(pod)
    if g is not None and g in cache.podgroups:
        return cache.podgroups[g].queue
    return solo_queue(pod)


class Preemptor:
    def __init__(
        self,
        cache: ClusterStore,
        config: SchedulerConfig,
        allocator: Allocator,
        bound_now: Set[str],
    ) -> None:
        self.cache = cache
        self.config = config
        self.allocator = allocator
        self.txn = allocator.txn
        self.bound_now = bound_now

    def victims(self, gang: Gang) -> list[Victim]:
        """Running pods of our schedulers, not the gang's own nor bound this session, that
        ``may_take`` allows."""
        cache = self.cache
        names = set(self.config.scheduler_names)
        mine = {p.key for p in gang.running}
        out: list[Victim] = []
        for key, node in cache.node_of.items():
            if key in mine or key in self.bound_now:
                continue
            pod = cache.pods[key]
            if pod.scheduler_name not in names or not self.may_take(gang, key, pod):
                continue
            out.append(Victim(key, node, cache.vec_of[key], pod.priority))
        return out

    def may_take(self, gang: Gang, key: str, pod: Pod) -> bool:
        """Preemption: a lower-priority pod, of the gang's queue or a reclaimable one."""
        if pod.priority >= gang.priority:
            return False
        q = queue_of(self.cache, key)
        queue = self.cache.queues.get(q)
        return queue is None or queue.reclaimable or q == gang.queue

    def _bundles(self, victims: list[Victim], inside: np.ndarray) -> list[Bundle]:
        cache = self.cache
        spec = Specs(cache)
        eligible = {v.key: v for v in victims}
        by_gang: dict[str, list[Victim]] = {}
        bundles: list[Bundle] = []
        for v in victims:
            if not inside[v.node]:
                continue
            g = gang_key(cache.pods[v.key])
            if g is None or spec(g) is None:  # a pod alone (a Kueue pod group is a gang)
                bundles.append(Bundle((v,), False, v.key))
            else:
                by_gang.setdefault(g, []).append(v)
        for g, here in sorted(by_gang.items()):
            running = [k for k in cache.members.get(g, {}) if k in cache.node_of]
            pg = spec(g)
            assert pg is not None
            surplus = max(0, len(running) - pg.min_member)
            here.sort(key=lambda v: (v.priority, natural_key(v.key)), reverse=False)
            singles = here[:surplus]
            bundles.extend(Bundle((v,), False, v.key) for v in singles)
            if len(here) > surplus and all(k in eligible for k in running):
                taken = {v.key for v in singles}
                rest = tuple(eligible[k] for k in sorted(running) if k not in taken)
                bundles.append(Bundle(rest, True, g))
        bundles.sort(key=Bundle.order)
        return bundles

    def admits(self, chosen: list[Bundle], bundle: Bundle) -> bool:
        """Whether ``bundle`` may join the victims ``chosen`` so far (reclaim narrows it)."""
        del chosen, bundle
        return True

    def _candidates(self, plan: GangPlan, total: IntArray, victims: list[Victim]) -> list[int]:
        cache = self.cache
        ix, lay, cap = cache.index, cache.layouts, cache.capacity
        limit, region = plan.frame.limit, plan.frame.region
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
            allowed = limit.allowed(ix, doms)
            free = cap.dom_alloc[doms] - cap.dom_used[doms]
            room = free + tl.counts(lo, hi, evictable)
            ok = allowed & (room >= total).all(axis=1)
            idx = np.flatnonzero(ok)
            deficit = np.maximum(total - free[idx], 0).sum(axis=1)
            order = np.lexsort((doms[idx], deficit))
            out.extend(int(h) for h in doms[idx][order][: self.config.preemption_max_domains])
        return out

    def _try(self, plan: GangPlan, h: int, total: IntArray, victims: list[Victim]) -> Choice | None:
        cache, txn = self.cache, self.txn
        narrowed = plan.within(cache, h)
        if isinstance(narrowed, Status):
            return None
        inside = np.zeros(len(cache.index.node_names), dtype=bool)
        inside[cache.index.real_nodes[h]] = True
        # a victim on a node no pod of the gang may use (nodeSelector, node affinity,
        # taints) never helps: tried first, such lower-priority pods used up the tries
        usable = np.zeros_like(inside)
        for shape in narrowed.demand.shapes:
            usable |= cache.filter.for_pod(shape.pods[0]).mask
        inside &= usable
        mark = txn.mark()
        chosen: list[Bundle] = []
        tries = 0
        found = False
        for b in self._bundles(victims, inside):
            if not self.admits(chosen, b):
                continue
            for v in b.victims:
                txn.evict(v.key, v.node, v.vec)
            chosen.append(b)
            free = cache.capacity.dom_alloc[h] - cache.capacity.dom_used[h]
            if not (free >= total).all():
                continue
            inner = txn.mark()
            out = self.allocator.allocate(narrowed)
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
        kept = self._prune(narrowed, h, total, chosen)
        return Choice(h, tuple(v for b in kept for v in b.victims))

    def _fits_without(self, plan: GangPlan, h: int, total: IntArray, bundles: list[Bundle]) -> bool:
        """Whether the gang fits in ``h`` when exactly ``bundles`` are evicted."""
        cache, txn = self.cache, self.txn
        mark = txn.mark()
        try:
            for b in bundles:
                for v in b.victims:
                    txn.evict(v.key, v.node, v.vec)
            free = cache.capacity.dom_alloc[h] - cache.capacity.dom_used[h]
            return bool((free >= total).all()) and self.allocator.allocate(plan).ok
        finally:
            txn.rollback(mark)

    def _prune(self, plan: GangPlan, h: int, total: IntArray, chosen: list[Bundle]) -> list[Bundle]:
        """``chosen`` without the bundles the gang does not need (see the module doc)."""
        if len(chosen) < 2:
            return chosen
        cache = self.cache
        kept = list(chosen)
        order = sorted(range(len(chosen)), key=lambda i: (-chosen[i].priority, -i))
        for i in order:
            b = chosen[i]
            if not b.whole:
                owner = gang_key(cache.pods[b.victims[0].key])
                if any(k.whole and k.name == owner for k in kept):
                    continue  # the rest of its gang goes: this pod must go too
            trial = [k for k in kept if k is not b]
            if self._fits_without(plan, h, total, trial):
                kept = trial
        return kept

    def preempt(self, plan: GangPlan, budget: Budget | None = None) -> Status:
        """Evict and place inside the transaction (``Status.domain``: where), or leave it
        untouched. No explain trace: the gang's own search is what explain shows."""
        victims = self.victims(plan.gang)
        if not victims or plan.demand.count == 0:
            return Status(Code.UNSCHEDULABLE)
        total = plan.demand.total
        choices = [
            c
            for h in self._candidates(plan, total, victims)
            if (c := self._try(plan, h, total, victims)) is not None
        ]
        if not choices:
            return Status(Code.UNSCHEDULABLE)
        best = min(choices, key=lambda c: c.key(self.cache))
        narrowed = plan.within(self.cache, best.domain)
        if isinstance(narrowed, Status):
            return narrowed
        mark = self.txn.mark()
        for v in best.victims:
            self.txn.evict(v.key, v.node, v.vec)
        out = self.allocator.allocate(narrowed, budget=budget)
        if not out.ok:
            self.txn.rollback(mark)
            return out
        return replace(out, domain=best.domain)
