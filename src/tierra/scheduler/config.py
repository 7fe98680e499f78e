"""Scheduler configuration: which pods are ours, which policies score, how hard to try.

A YAML file selects and weights the scoring policies and sets the few knobs; every
mistake is reported with the file and field path (``policies.binpak: unknown policy;
known: binpack, spread, topology, lookahead``), all at once, as ``ConfigError``. Example::

    schedulerNames: [tierra, volcano]
    degradedHyperNodes: avoid        # avoid | exclude | ignore
    preemption: {enabled: true, maxDomains: 16, delay: 30s}   # delay: KAI's preemption delay
    reclaim: {enabled: true}
    maxAttemptsPerTier: 32
    policies:                        # listed = enabled; omitted = disabled
      binpack: {weight: 1, resources: {cpu: 1, memory: 1, nvidia.com/gpu: 2}, fading: 0.8}
      topology: {weight: 1}
      lookahead: {weight: 1}
    links:                           # for HyperNodes without spec.link, and inside nodes
      node: {bandwidthGBps: 900}
      node/NVIDIA-GB200: {bandwidthGBps: 1800}
      aggregation: {bandwidthGBps: 100, oversubscription: 2}
    featureGates: {TASBalancedPlacement: true}   # Kueue's alpha balanced placement
    contention: {weight: 1}          # opt-in: running gangs' load on oversubscribed uplinks

``links`` has the schema of the simulator's cost model (``tiers:`` there): keys are tier
names (or ``tier<N>``), ``node``, ``node/<nvidia.com/gpu.product>`` and ``cluster``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tierra.api.duration import parse_duration
from tierra.api.fields import Fields, Report
from tierra.api.files import read_yaml
from tierra.errors import ConfigError, InputError, Origin, Problem
from tierra.scheduler.constraints.balanced import BalancedPlacement
from tierra.scheduler.constraints.health import DegradedMode
from tierra.scheduler.constraints.protocol import Constraint
from tierra.scheduler.constraints.rank_order import RankOrder
from tierra.scheduler.constraints.registry import DEFAULT
from tierra.scheduler.scoring import REGISTRY, Policy
from tierra.scheduler.scoring.binpack import Binpack
from tierra.scheduler.scoring.links import LinkRate, LinkTable, link_table
from tierra.scheduler.scoring.lookahead import Lookahead
from tierra.scheduler.scoring.topology import Topology

TOP_KEYS = (
    "schedulerNames",
    "degradedHyperNodes",
    "preemption",
    "reclaim",
    "maxAttemptsPerTier",
    "policies",
    "links",
    "featureGates",
    "contention",
)
FEATURE_GATES = ("TASBalancedPlacement",)  # Kueue's Configuration key and gate names


@dataclass(frozen=True, slots=True)
class WeightedPolicy:
    policy: Policy
    weight: float


def default_policies() -> tuple[WeightedPolicy, ...]:
    """Binpack, topology and the look-ahead, weighted alike (the look-ahead's weight was
    set equal to binpack's, not fitted to any benchmark seed)."""
    return (
        WeightedPolicy(Binpack(), 1.0),
        WeightedPolicy(Topology(), 1.0),
        WeightedPolicy(Lookahead(), 1.0),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerConfig:
    """How one scheduler instance behaves; the defaults reproduce Volcano's choices."""

    scheduler_names: tuple[str, ...] = ("tierra",)
    policies: tuple[WeightedPolicy, ...] = field(default_factory=default_policies)
    degraded: DegradedMode = DegradedMode.AVOID
    preemption: bool = True
    preemption_max_domains: int = 16
    # seconds a gang waits before it may preempt or reclaim (KAI's preemption delay), so
    # short waits do not churn running jobs; needs the adapter's clock (``run_session(now=)``)
    preemption_delay: float = 0.0
    reclaim: bool = True  # a queue below its deserved share takes room back from others
    max_attempts_per_tier: int = 32  # placement trials per tier for gangs counts cannot settle
    links: LinkTable = ()  # link rates where HyperNodes carry no spec.link (``links.py``)
    # the constraints asked, in order (``constraints/registry.py``); a test may pass its own
    constraints: tuple[Constraint, ...] = DEFAULT
    # alpha behaviour switched on by name, as Kueue's ``featureGates`` (see FEATURE_GATES)
    feature_gates: frozenset[str] = frozenset()
    # weight of the load running gangs put on shared oversubscribed uplinks in a domain's
    # score (``constraints/contention.py``); 0: off, the default (decisions as before)
    contention: float = 0.0

    def with_scheduler_names(self, names: tuple[str, ...]) -> SchedulerConfig:
        return replace(self, scheduler_names=names) if names else self


def parse_config(data: Any, source: str = "<config>") -> SchedulerConfig:
    """Build a config from decoded YAML; raise ``ConfigError`` listing every problem."""
    sink: list[Problem] = []
    report = Report(Origin(source, 1), "", sink)
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping of settings, got {type(data).__name__}")
    f = Fields(data, "", report)
    for key in data:
        if key not in TOP_KEYS:
            f.problem(str(key), f"unknown setting; known: {', '.join(TOP_KEYS)}")
    names = tuple(f.str_list("schedulerNames")) or ("tierra",)
    degraded = DegradedMode(f.enum("degradedHyperNodes", tuple(DegradedMode), "avoid"))
    pre = f.obj("preemption")
    for key in pre.data:
        if key not in ("enabled", "maxDomains", "delay"):
            pre.problem(str(key), "unknown setting; known: enabled, maxDomains, delay")
    max_domains = pre.integer("maxDomains", 16, minimum=1)
    preemption = pre.boolean("enabled", True)  # read before the check below, like every field
    delay = 0.0
    if pre.has("delay"):
        found = parse_duration(pre.raw("delay"))
        if found is None:
            pre.problem(
                "delay", f"expected seconds or a duration like 30s or 2m, got {pre.raw('delay')!r}"
            )
        delay = found or 0.0
    rec = f.obj("reclaim")
    for key in rec.data:
        if key != "enabled":
            rec.problem(str(key), "unknown setting; known: enabled")
    reclaim = rec.boolean("enabled", True)
    attempts = f.integer("maxAttemptsPerTier", 32, minimum=1)
    policies: tuple[WeightedPolicy, ...] = default_policies()
    if f.has("policies"):
        pf = f.obj("policies")
        chosen: list[WeightedPolicy] = []
        for name in pf.data:
            parse = REGISTRY.get(str(name))
            if parse is None:
                pf.problem(str(name), f"unknown policy; known: {', '.join(REGISTRY)}")
                continue
            args = pf.obj(str(name))
            weight = args.number("weight")
            if weight is not None and weight < 0:
                args.problem(
                    "weight", f"must be >= 0 (omit the policy to disable it), got {weight}"
                )
                weight = None
            chosen.append(WeightedPolicy(parse(args), 1.0 if weight is None else weight))
        order = list(REGISTRY)
        policies = tuple(sorted(chosen, key=lambda wp: order.index(wp.policy.name)))
    links = _links(f.obj("links"))
    gates = _gates(f.obj("featureGates"))
    contention = _contention(f.obj("contention"))
    if sink:
        raise ConfigError("\n".join(str(p) for p in sink))
    constraints = DEFAULT
    if "TASBalancedPlacement" in gates:  # before rank order: it may place a leader first
        last = next(i for i, c in enumerate(DEFAULT) if isinstance(c, RankOrder))
        constraints = (*DEFAULT[:last], BalancedPlacement(), *DEFAULT[last:])
    return SchedulerConfig(
        feature_gates=gates,
        constraints=constraints,
        links=links,
        scheduler_names=names,
        policies=policies,
        degraded=degraded,
        preemption=preemption,
        preemption_max_domains=max_domains,
        preemption_delay=delay,
        reclaim=reclaim,
        max_attempts_per_tier=attempts,
        contention=contention,
    )


def _contention(con: Fields) -> float:
    """``contention: {weight: N}``: 0 (off) unless a non-negative weight is given."""
    for key in con.data:
        if key != "weight":
            con.problem(str(key), "unknown setting; known: weight")
    weight = con.number("weight") or 0.0
    if weight < 0:
        con.problem("weight", f"must be >= 0 (0 or omitted: off), got {weight}")
        weight = 0.0
    return weight


def _gates(f: Fields) -> frozenset[str]:
    """``featureGates``: gate name -> true/false, as Kueue's Configuration writes it."""
    on: set[str] = set()
    for name in f.data:
        if name not in FEATURE_GATES:
            f.problem(str(name), f"unknown feature gate; known: {', '.join(FEATURE_GATES)}")
            continue
        if f.boolean(str(name), False):
            on.add(str(name))
    return frozenset(on)


def _links(f: Fields) -> LinkTable:
    out: dict[str, LinkRate] = {}
    for key in f.data:
        entry = f.obj(str(key))
        for k in entry.data:
            if k not in ("bandwidthGBps", "oversubscription", "medium"):
                entry.problem(str(k), "unknown setting; known: bandwidthGBps, oversubscription")
        bw = entry.number("bandwidthGBps")
        over = entry.number("oversubscription")
        if bw is None or bw <= 0:
            entry.problem("bandwidthGBps", f"must be a number > 0 (GB/s per GPU), got {bw}")
            continue
        if over is not None and over < 1:
            entry.problem("oversubscription", f"must be >= 1 (downlink:uplink), got {over}")
            continue
        out[str(key)] = LinkRate(bw, over or 1.0)
    return link_table(out)


def load_config(path: str | Path) -> SchedulerConfig:
    """Read a YAML configuration file; ``ConfigError`` names the file and field."""
    name = str(path)
    try:
        data = read_yaml(path, expected="a scheduler configuration YAML file")
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    return parse_config(data, name)
