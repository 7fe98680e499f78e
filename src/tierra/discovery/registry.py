"""Every discovery source, listed by hand: name -> what it reads and how to run it.

No source registers itself on import. A caller (the CLI, the controller) builds a
``Request`` from its own options and calls ``run``; each runner reads files (or, for
UFM with a URL, the server) and returns a ``Discovery``. The Kubernetes adapter feeds
live objects to the typed entry points (``discover_labels``, ``discover_dra``) directly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tierra.api.files import read_text
from tierra.api.node import Node
from tierra.api.snapshot import load_snapshot, read_documents
from tierra.discovery import dra, ibnetdiscover, labels, nvidia_smi, presets, slurm, ufm
from tierra.discovery.result import Discovery
from tierra.errors import ConfigError, InputError, Problem, Severity


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """Everything a source may be given; each source reads the fields it needs."""

    files: tuple[Path, ...] = ()
    owner: str | None = None
    prefix: str | None = None
    levels: tuple[str, ...] = ()  # each "[NAME=]KEY,KEY,...": one label topology
    tier_names: tuple[str, ...] = ()  # each "KEY=NAME": the tier name of that label's level
    preset: str | None = None
    host_pattern: str | None = None
    allow_partial: bool = False
    url: str | None = None
    credentials: Path | None = None
    insecure: bool = False
    ca_file: Path | None = None
    timeout: float = 30.0
    retries: int = 3
    node: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


Runner = Callable[[Request], Discovery]
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")
"""The owner becomes the value of the managed-by label, so it must be a valid one."""


@dataclass(frozen=True, slots=True)
class Source:
    name: str
    summary: str
    reads: str
    run: Runner


def _need_files(req: Request, what: str) -> None:
    if not req.files:
        raise InputError(f"give {what}")


def _labels(req: Request) -> Discovery:
    _need_files(req, "one or more files holding Node objects")
    if not req.levels and not req.preset:
        raise ConfigError("give --levels KEY,KEY,... (repeatable) and/or --preset NAME")
    docs = [doc for f in req.files for doc in read_documents(f)]
    topologies = list(presets.preset(req.preset, docs)) if req.preset else []
    topologies += level_topologies(req.levels, req.extra.get("name", "labels"))
    check_unique_names(topologies)
    topologies = labels.with_tier_names(topologies, parse_tier_names(req.tier_names))
    nodes = load_nodes(req.files)
    if not nodes:
        raise InputError("no Node objects in the input")
    return labels.discover_labels(
        nodes, topologies, owner=req.owner or labels.SOURCE, prefix=req.prefix
    )


def level_topologies(levels: Sequence[str], default: str = "labels") -> list[labels.LabelTopology]:
    """``[NAME=]KEY,KEY,...`` specs (widest first) as label topologies.

    Unnamed specs take ``default`` (numbered when there are several), as ``--levels`` does.
    """
    out = []
    for i, spec in enumerate(levels):
        name, sep, keys = spec.partition("=")
        if not sep:
            name, keys = (default if len(levels) == 1 else f"{default}{i + 1}"), spec
        out.append(labels.make_topology(name.strip(), keys.split(",")))
    return out


def parse_tier_names(specs: Sequence[str]) -> dict[str, str]:
    """``KEY=NAME`` specs (``--tier-name example.com/rack=rack``) as key -> tier name.

    A label key never holds ``=``, so the first one splits; a key named twice is an error.
    """
    out: dict[str, str] = {}
    for spec in specs:
        key, sep, name = (part.strip() for part in spec.partition("="))
        if not sep or not key or not name:
            raise ConfigError(f"--tier-name takes KEY=NAME (example.com/rack=rack), not {spec!r}")
        if key in out:
            raise ConfigError(f"label {key!r} is given two tier names")
        out[key] = name
    return out


def check_unique_names(topologies: Sequence[labels.LabelTopology]) -> None:
    names = [t.name for t in topologies]
    if len(set(names)) != len(names):
        raise ConfigError(f"two label topologies share a name: {', '.join(names)}")


def load_nodes(paths: Sequence[Path]) -> tuple[Node, ...]:
    """The Node objects in ``paths``; a Node with a bad field is an ``InputError``.

    Other kinds in the files are ignored, but a half-read Node is not: dropping a bad
    ``spec.unschedulable`` would report a cordoned node as ready.
    """
    snapshot = load_snapshot(list(paths))
    errors = [
        p for p in snapshot.problems if p.severity is Severity.ERROR and p.obj.startswith("Node/")
    ]
    if errors:
        raise InputError(errors)
    return snapshot.nodes


def _ibnetdiscover(req: Request) -> Discovery:
    _need_files(req, "one or more ibnetdiscover dumps")
    return ibnetdiscover.discover_ibnetdiscover(
        req.files,
        owner=req.owner or ibnetdiscover.SOURCE,
        prefix=req.prefix or "ib",
        host_pattern=req.host_pattern,
        allow_partial=req.allow_partial,
    )


def _ufm(req: Request) -> Discovery:
    owner = req.owner or ufm.SOURCE
    prefix = req.prefix or "ufm"
    if req.url:
        # httpx (and ssl) only for a live server: reading a saved response needs neither.
        from tierra.discovery.ufm_client import UfmClient, UfmError, load_credentials  # noqa: PLC0415

        if req.credentials is None:
            raise InputError("--url needs --credentials FILE (username:password or a Secret)")
        creds = load_credentials(req.credentials)
        verify: bool | str = False if req.insecure else (str(req.ca_file) if req.ca_file else True)
        try:
            with UfmClient(
                req.url, creds, timeout=req.timeout, retries=req.retries, verify=verify
            ) as client:
                text = client.get_ports()
                origin = client.ports_url
        except UfmError as exc:
            raise InputError(str(exc)) from None
        return ufm.discover_ufm(
            text, origin=origin, owner=owner, prefix=prefix, host_pattern=req.host_pattern
        )
    if len(req.files) != 1:
        raise InputError("give one saved ports response (JSON) or --url")
    path = req.files[0]
    text = read_text(path, expected="a saved UFM ports response (JSON)")
    return ufm.discover_ufm(
        text, origin=str(path), owner=owner, prefix=prefix, host_pattern=req.host_pattern
    )


def _slurm(req: Request) -> Discovery:
    _need_files(req, "a topology.conf or topology.yaml")
    return slurm.discover_slurm(
        req.files, owner=req.owner or slurm.SOURCE, prefix=req.prefix or "slurm"
    )


def _nvidia_smi(req: Request) -> Discovery:
    _need_files(req, "one 'nvidia-smi topo -m' output per node")
    return nvidia_smi.discover_nvidia_smi(req.files, node=req.node)


def _dra(req: Request) -> Discovery:
    _need_files(req, "one or more files holding ResourceSlice objects")
    problems: list[Problem] = []
    slices = dra.slices_from_documents(
        (doc for f in req.files for doc in read_documents(f)), problems
    )
    if problems:
        raise InputError(problems)
    if not slices:
        raise InputError("no ResourceSlice objects (resource.k8s.io) in the input")
    return dra.discover_dra(
        slices, owner=req.owner or dra.SOURCE, prefix=req.prefix or "dra-clique"
    )


SOURCES: Mapping[str, Source] = {
    s.name: s
    for s in (
        Source("labels", "node labels (--levels or --preset)", "Node objects", _labels),
        Source(
            "ibnetdiscover", "an InfiniBand fabric dump", "ibnetdiscover output", _ibnetdiscover
        ),
        Source("ufm", "NVIDIA UFM ports", "a saved ports response, or --url", _ufm),
        Source("slurm", "Slurm topology", "topology.conf or topology.yaml", _slurm),
        Source(
            "nvidia-smi", "GPUs, NICs and NUMA inside a node", "nvidia-smi topo -m", _nvidia_smi
        ),
        Source("dra", "DRA device attributes", "ResourceSlice objects", _dra),
    )
}


def run(name: str, request: Request) -> Discovery:
    source = SOURCES.get(name)
    if source is None:
        raise ConfigError(f"unknown source {name!r}; choose one of: {', '.join(SOURCES)}")
    if request.owner and (why := owner_problem(request.owner)):
        raise ConfigError(f"--owner {why}")
    return source.run(request)


def owner_problem(owner: str) -> str | None:
    """Why ``owner`` cannot be the managed-by label's value, or None if it can."""
    if _LABEL_VALUE.fullmatch(owner):
        return None
    return (
        f"{owner!r} is not a label value (at most 63 letters, digits, "
        "'-', '_' and '.', starting and ending with a letter or digit)"
    )
