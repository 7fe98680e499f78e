"""``tierra discover SOURCE FILE…``: turn what a cluster already knows into HyperNodes.

Prints the desired HyperNodes (and, for the in-node sources, Node annotation patches)
as YAML or JSON, with status (``Ready``/``Degraded``, unhealthy nodes) when node or
link health is known. Notes and a summary go to stderr. ``--reconcile EXISTING`` prints
the plan against existing HyperNodes instead: what to create, update and delete, how
many are unchanged, and every conflict.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tierra.api.hypernode import TIERRA_GROUP, VOLCANO_GROUP, encode_hypernode
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
from tierra.errors import ConfigError, InputError

GROUPS = {"tierra": TIERRA_GROUP, "volcano": VOLCANO_GROUP}


def discover(
    source: Annotated[
        str,
        typer.Argument(help=f"One of: {', '.join(registry.SOURCES)}.", metavar="SOURCE"),
    ],
    files: Annotated[
        list[Path] | None, typer.Argument(help="Input files (see each source).", show_default=False)
    ] = None,
    *,
    output: Annotated[Output, typer.Option("-o", "--output", help="yaml or json")] = Output.YAML,
    levels: Annotated[
        list[str] | None,
        typer.Option(
            help="labels: [NAME=]KEY,KEY,... widest first (hostname optional last); repeatable."
        ),
    ] = None,
    preset: Annotated[
        str | None,
        typer.Option(help="labels: eks, gke, oke, nvidia-clique, topograph, kueue or kai."),
    ] = None,
    name: Annotated[
        str, typer.Option(help="labels: the topology's name with --levels.")
    ] = "labels",
    owner: Annotated[
        str | None, typer.Option(help="Ownership label value (default: the source).")
    ] = None,
    prefix: Annotated[str | None, typer.Option(help="HyperNode name prefix.")] = None,
    host_pattern: Annotated[
        str | None,
        typer.Option(help="ibnetdiscover/ufm: RE2 pattern finding the host in a description."),
    ] = None,
    allow_partial: Annotated[
        bool, typer.Option(help="ibnetdiscover: accept a dump naming undescribed devices.")
    ] = False,
    url: Annotated[str | None, typer.Option(help="ufm: the UFM server (https://...).")] = None,
    credentials: Annotated[
        Path | None, typer.Option(help="ufm: 'user:password' file or a Secret manifest.")
    ] = None,
    insecure: Annotated[bool, typer.Option(help="ufm: do not verify TLS.")] = False,
    ca_file: Annotated[Path | None, typer.Option(help="ufm: CA bundle to trust.")] = None,
    timeout: Annotated[float, typer.Option(help="ufm: seconds per request.")] = 30.0,
    retries: Annotated[int, typer.Option(help="ufm: retries on transient failures.")] = 3,
    node: Annotated[
        str | None, typer.Option(help="nvidia-smi: the node's name (default: the file name).")
    ] = None,
    nodes: Annotated[
        list[Path] | None,
        typer.Option("--nodes", help="Node objects for the health roll-up (repeatable)."),
    ] = None,
    status: Annotated[bool, typer.Option(help="Compute status (health).")] = True,
    group: Annotated[str, typer.Option(help="API group to write: tierra or volcano.")] = "tierra",
    reconcile_with: Annotated[
        list[Path] | None,
        typer.Option("--reconcile", help="Existing HyperNodes: print the plan against them."),
    ] = None,
    max_delete_share: Annotated[
        float | None,
        typer.Option(
            help="--reconcile: refuse a plan deleting more than this share of the owned"
            f" HyperNodes (0-1; default {reconcile.DEFAULT_MAX_DELETE_SHARE})."
        ),
    ] = None,
    allow_mass_delete: Annotated[
        bool, typer.Option(help="--reconcile: plan the deletes however many there are.")
    ] = False,
) -> None:
    """Discover HyperNodes from SOURCE and print them (or the plan with --reconcile)."""
    if output is Output.TEXT:
        fail("-o takes yaml or json")
    if group not in GROUPS:
        fail(f"--group takes tierra or volcano, not {group!r}")
    if not reconcile_with and (max_delete_share is not None or allow_mass_delete):
        fail("--max-delete-share and --allow-mass-delete only apply with --reconcile")
    share = reconcile.DEFAULT_MAX_DELETE_SHARE if max_delete_share is None else max_delete_share
    if not 0.0 <= share <= 1.0:
        fail(f"--max-delete-share takes a share between 0 and 1, not {share}")
    request = registry.Request(
        files=tuple(files or ()),
        owner=owner,
        prefix=prefix,
        levels=tuple(spec for spec in (levels or ()) if spec.strip()),
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
    print_problems(found.notes)
    if found.summary:
        err_console.print(
            f"[dim]{source}: " + ", ".join(f"{k} {v}" for k, v in found.summary.items()) + "[/dim]"
        )
    for issue in found.link_issues[:20]:
        err_console.print(f"[yellow]warning:[/yellow] {issue}", markup=True, highlight=False)
    if len(found.link_issues) > 20:
        err_console.print(f"[yellow]warning:[/yellow] ... {len(found.link_issues) - 20} more")
    hypernodes = found.hypernodes
    if status and hypernodes and (node_objects or found.link_issues):
        hypernodes = health.rollup(hypernodes, node_objects, found.link_issues)
    objects: list[Any]
    if reconcile_with:
        existing = load_snapshot_or_exit(reconcile_with)
        exit_on_errors(existing.problems)
        plan = reconcile.plan(
            hypernodes,
            existing.hypernodes,
            owner=found.owner,
            nodes=node_objects or existing.nodes,
            group=GROUPS[group],
        )
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


def _nodes(source: str, request: registry.Request, extra: list[Path] | None) -> tuple[Node, ...]:
    """Node objects for health: ``--nodes`` files, or the labels source's own input."""
    paths = list(extra or ())
    if source == "labels":
        paths += list(request.files)
    if not paths:
        return ()
    return registry.load_nodes(paths)
