"""``tierra discover SOURCE FILE…``: turn what a cluster already knows into HyperNodes.

Prints the desired HyperNodes (and, for the in-node sources, Node annotation patches)
as YAML or JSON, with status (``Ready``/``Degraded``, unhealthy nodes) when node or
link health is known. Notes and a summary go to stderr. ``--reconcile EXISTING`` prints
the plan against existing HyperNodes instead: what to create, update and delete, how
many are unchanged, and every conflict.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from tierra.api.hypernode import TIERRA_GROUP, VOLCANO_GROUP, HyperNode, encode_hypernode
from tierra.api.manifest import dump_json, dump_yaml
from tierra.api.node import Node
from tierra.cli.common import (
    Output,
    console,
    err_console,
    exit_on_errors,
    fail,
    load_snapshot_or_exit,
    print_problems,
)
from tierra.discovery import health, reconcile, registry
from tierra.discovery.nodetopology import node_patch
from tierra.discovery.result import Discovery
from tierra.errors import ConfigError, InputError

GROUPS = {"tierra": TIERRA_GROUP, "volcano": VOLCANO_GROUP}


# The options, one alias each (most belong to one source, named first in the help).
SourceArg = Annotated[
    str, typer.Argument(help=f"One of: {', '.join(registry.SOURCES)}.", metavar="SOURCE")
]
FilesArg = Annotated[
    list[Path] | None, typer.Argument(help="Input files (see each source).", show_default=False)
]
DocumentOutput = Annotated[Output, typer.Option("-o", "--output", help="yaml or json")]
LevelsOpt = Annotated[
    list[str] | None,
    typer.Option(
        help="labels: [NAME=]KEY,KEY,... widest first (hostname optional last); repeatable."
    ),
]
TierNameOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tier-name",
        help="labels: KEY=NAME names the level of label KEY (tierName, as PodGroups'"
        " highestTierName says it); repeatable. Default: the label key.",
    ),
]
PresetOpt = Annotated[
    str | None,
    typer.Option(help="labels: eks, gke, oke, nvidia-clique, topograph, kueue or kai."),
]
NameOpt = Annotated[str, typer.Option(help="labels: the topology's name with --levels.")]
OwnerOpt = Annotated[str | None, typer.Option(help="Ownership label value (default: the source).")]
PrefixOpt = Annotated[str | None, typer.Option(help="HyperNode name prefix.")]
HostPatternOpt = Annotated[
    str | None,
    typer.Option(help="ibnetdiscover/ufm: RE2 pattern finding the host in a description."),
]
AllowPartialOpt = Annotated[
    bool, typer.Option(help="ibnetdiscover: accept a dump naming undescribed devices.")
]
UrlOpt = Annotated[str | None, typer.Option(help="ufm: the UFM server (https://...).")]
CredentialsOpt = Annotated[
    Path | None, typer.Option(help="ufm: 'user:password' file or a Secret manifest.")
]
InsecureOpt = Annotated[bool, typer.Option(help="ufm: do not verify TLS.")]
CaFileOpt = Annotated[Path | None, typer.Option(help="ufm: CA bundle to trust.")]
TimeoutOpt = Annotated[float, typer.Option(help="ufm: seconds per request.")]
RetriesOpt = Annotated[int, typer.Option(help="ufm: retries on transient failures.")]
NodeOpt = Annotated[
    str | None, typer.Option(help="nvidia-smi: the node's name (default: the file name).")
]
NodesOpt = Annotated[
    list[Path] | None,
    typer.Option("--nodes", help="Node objects for the health roll-up (repeatable)."),
]
StatusOpt = Annotated[bool, typer.Option(help="Compute status (health).")]
GroupOpt = Annotated[str, typer.Option(help="API group to write: tierra or volcano.")]
ReconcileOpt = Annotated[
    list[Path] | None,
    typer.Option("--reconcile", help="Existing HyperNodes: print the plan against them."),
]
MaxDeleteShareOpt = Annotated[
    float | None,
    typer.Option(
        help="--reconcile: refuse a plan deleting more than this share of the owned"
        f" HyperNodes (0-1; default {reconcile.DEFAULT_MAX_DELETE_SHARE})."
    ),
]
AllowMassDeleteOpt = Annotated[
    bool, typer.Option(help="--reconcile: plan the deletes however many there are.")
]


def discover(
    source: SourceArg,
    files: FilesArg = None,
    *,
    output: DocumentOutput = Output.YAML,
    levels: LevelsOpt = None,
    tier_names: TierNameOpt = None,
    preset: PresetOpt = None,
    name: NameOpt = "labels",
    owner: OwnerOpt = None,
    prefix: PrefixOpt = None,
    host_pattern: HostPatternOpt = None,
    allow_partial: AllowPartialOpt = False,
    url: UrlOpt = None,
    credentials: CredentialsOpt = None,
    insecure: InsecureOpt = False,
    ca_file: CaFileOpt = None,
    timeout: TimeoutOpt = 30.0,
    retries: RetriesOpt = 3,
    node: NodeOpt = None,
    nodes: NodesOpt = None,
    status: StatusOpt = True,
    group: GroupOpt = "tierra",
    reconcile_with: ReconcileOpt = None,
    max_delete_share: MaxDeleteShareOpt = None,
    allow_mass_delete: AllowMassDeleteOpt = False,
) -> None:
    """Discover HyperNodes from SOURCE and print them (or the plan with --reconcile)."""
    share = _check_options(output, group, bool(reconcile_with), max_delete_share, allow_mass_delete)
    request = registry.Request(
        files=tuple(files or ()),
        owner=owner,
        prefix=prefix,
        levels=tuple(spec for spec in (levels or ()) if spec.strip()),
        tier_names=tuple(tier_names or ()),
        preset=preset,
        host_pattern=host_pattern,
        allow_partial=allow_partial,
        url=url,
        credentials=credentials,
        insecure=insecure,
        ca_file=ca_file,
        timeout=timeout,
        retries=retries,
        node=node,
        extra={"name": name},
    )
    try:
        found = registry.run(source, request)
        node_objects = list(_nodes(source, request, nodes))
    except InputError as exc:
        fail(exc)
    except ConfigError as exc:
        fail(str(exc))
    _notes(source, found)
    hypernodes = found.hypernodes
    if status and hypernodes and (node_objects or found.link_issues):
        hypernodes = health.rollup(hypernodes, node_objects, found.link_issues)
    objects: list[Any]
    if reconcile_with:
        plan = _plan(found, hypernodes, node_objects, reconcile_with, GROUPS[group])
        refusal = None if allow_mass_delete else reconcile.guard_deletes(plan, max_share=share)
        if refusal is not None:
            fail(
                f"{refusal}. If the deletes are meant, pass --allow-mass-delete"
                " (or a larger --max-delete-share)"
            )
        for c in plan.conflicts:
            err_console.print(f"[yellow]conflict:[/yellow] HyperNode/{c.name}: {c.reason}")
        objects = [{"kind": "DiscoveryPlan", "source": found.source, **plan.to_dict()}]
    else:
        objects = [encode_hypernode(h, GROUPS[group]) for h in hypernodes]
        objects += [node_patch(t) for t in found.node_topologies]
    text = dump_json(objects) if output is Output.JSON else dump_yaml(objects)
    console.out(text, end="" if text.endswith("\n") else "\n", highlight=False)


def _check_options(
    output: Output,
    group: str,
    reconciling: bool,
    max_delete_share: float | None,
    allow_mass_delete: bool,
) -> float:
    """Refuse options that contradict each other; the share of deletes allowed."""
    if output is Output.TEXT:
        fail("-o takes yaml or json")
    if group not in GROUPS:
        fail(f"--group takes tierra or volcano, not {group!r}")
    if not reconciling and (max_delete_share is not None or allow_mass_delete):
        fail("--max-delete-share and --allow-mass-delete only apply with --reconcile")
    share = reconcile.DEFAULT_MAX_DELETE_SHARE if max_delete_share is None else max_delete_share
    if not 0.0 <= share <= 1.0:
        fail(f"--max-delete-share takes a share between 0 and 1, not {share}")
    return share


def _notes(source: str, found: Discovery) -> None:
    """What the source noted, its summary and the first link issues, on stderr."""
    print_problems(found.notes)
    if found.summary:
        err_console.print(
            f"[dim]{source}: " + ", ".join(f"{k} {v}" for k, v in found.summary.items()) + "[/dim]"
        )
    for issue in found.link_issues[:20]:
        err_console.print(f"[yellow]warning:[/yellow] {issue}", markup=True, highlight=False)
    if len(found.link_issues) > 20:
        err_console.print(f"[yellow]warning:[/yellow] ... {len(found.link_issues) - 20} more")


def _plan(
    found: Discovery,
    hypernodes: Sequence[HyperNode],
    node_objects: Sequence[Node],
    reconcile_with: Sequence[Path],
    group: str,
) -> reconcile.Plan:
    existing = load_snapshot_or_exit(reconcile_with)
    exit_on_errors(existing.problems)
    return reconcile.plan(
        hypernodes,
        existing.hypernodes,
        owner=found.owner,
        nodes=node_objects or existing.nodes,
        group=group,
    )


def _nodes(source: str, request: registry.Request, extra: list[Path] | None) -> tuple[Node, ...]:
    """Node objects for health: ``--nodes`` files, or the labels source's own input."""
    paths = list(extra or ())
    if source == "labels":
        paths += list(request.files)
    if not paths:
        return ()
    return registry.load_nodes(paths)
