"""An allocation result as kube-scheduler writes it: devices, configuration, node selector.

After the end of Allocate in allocator_stable.go: each class's configuration once, for
every request of that class; then the claim's own configuration, for every request it
names (upstream appends a configuration once per matching request, and so does tierra,
so both write the same status); the node selector is ``matchFields metadata.name`` when
any device is local to a node, else the slices' own selectors, else none.
"""

from __future__ import annotations

from collections.abc import Sequence

from tierra.api.labels import Operator, Requirement
from tierra.api.pod import NodeSelectorTerm
from tierra.api.resource import (
    AllocatedConfig,
    Allocation,
    DeviceResult,
    ResourceClaim,
)
from tierra.scheduler.devices.pools import Candidate
from tierra.scheduler.devices.prepare import Alternative


def build_allocation(
    claim: ResourceClaim,
    results: Sequence[tuple[Alternative, Candidate]],
    chosen: Sequence[Alternative],
) -> Allocation:
    devices = tuple(
        DeviceResult(
            request=alt.name,
            driver=c.id[0],
            pool=c.id[1],
            device=c.id[2],
            admin_access=alt.request.admin_access,
            tolerations=alt.request.tolerations,
        )
        for alt, c in results
    )
    return Allocation(
        results=devices,
        config=_configs(claim, chosen),
        node_selector=node_selector([c for _, c in results]),
    )


def _configs(claim: ResourceClaim, chosen: Sequence[Alternative]) -> tuple[AllocatedConfig, ...]:
    out: list[AllocatedConfig] = []
    by_class: dict[str, tuple[int, int]] = {}
    for alt in chosen:
        name = alt.klass.meta.name
        if name in by_class:
            start, end = by_class[name]
            for i in range(start, end):
                cfg = out[i].config
                grown = type(cfg)(cfg.driver, cfg.parameters, (*cfg.requests, alt.name))
                out[i] = AllocatedConfig(source="FromClass", config=grown)
            continue
        start = len(out)
        for cfg in alt.klass.config:
            out.append(
                AllocatedConfig(
                    source="FromClass", config=type(cfg)(cfg.driver, cfg.parameters, (alt.name,))
                )
            )
        by_class[name] = (start, len(out))
    for cfg in claim.spec.config:
        if not cfg.requests:
            out.append(AllocatedConfig(source="FromClaim", config=cfg))
            continue
        for request, alt in zip(claim.spec.requests, chosen, strict=True):
            if request.name in cfg.requests or (alt.parent and alt.name in cfg.requests):
                out.append(AllocatedConfig(source="FromClaim", config=cfg))
    return tuple(out)


def node_selector(devices: Sequence[Candidate]) -> tuple[NodeSelectorTerm, ...] | None:
    fields: list[Requirement] = []
    expressions: list[Requirement] = []
    for c in devices:
        if c.slice.node_name:
            name = Requirement("metadata.name", Operator.IN, (c.slice.node_name,))
            return (NodeSelectorTerm(match_fields=(name,)),)
        if c.slice.node_selector and len(c.slice.node_selector) == 1:
            term = c.slice.node_selector[0]
            fields.extend(r for r in term.match_fields if r not in fields)
            expressions.extend(r for r in term.match_expressions if r not in expressions)
    if fields or expressions:
        return (NodeSelectorTerm(tuple(expressions), tuple(fields)),)
    return None
