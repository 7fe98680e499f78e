"""The controller's configuration file: which sources, which API groups, which exports.

Read like every other tierra input: every problem is reported with its field path
(``sources[1].credentialsSecret``) before anything runs, and ``load_config`` raises
``InputError`` carrying all of them. Sources take the options ``tierra discover`` takes,
spelled in camelCase::

    groups: [tierra, volcano]        # where HyperNodes are written (default: [tierra])
    sources:
    - name: labels                   # node labels, watched live
      levels: ["rack=topology.kubernetes.io/zone,example.com/rack"]   # or preset: eks
      tierNames: {example.com/rack: rack}   # PodGroups say highestTierName: rack
    - name: ibnetdiscover            # a fabric dump, re-read when it changes
      configMap: {name: fabric, key: ibnetdiscover.txt}               # or file: /path
    - name: ufm                      # asked every interval
      url: https://ufm.example.com
      credentialsSecret: ufm-credentials                              # keys username, password
      interval: 10m
    - name: slurm
      file: /etc/slurm/topology.conf
    - name: dra                      # ResourceSlices, watched live
    status: {groups: [tierra, volcano]}
    export:
      kueue: true                    # Topology objects + the node labels they read
      kai: false
      slurm: {configMap: tierra-slurm-topology, format: yaml}
    guard: {maxDeleteShare: 0.5}

Each source owns what it writes through the managed-by label, whose value is its
``owner`` (default: the source's name); two sources may not share an owner.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tierra.api.fields import Fields, Report
from tierra.api.files import parse_yaml, read_yaml
from tierra.api.hypernode import TIERRA_GROUP, VOLCANO_GROUP
from tierra.api.meta import dns_subdomain_problem
from tierra.api.regex import compile_pattern
from tierra.discovery import presets, registry
from tierra.discovery.labels import LabelTopology, with_tier_names
from tierra.discovery.reconcile import DEFAULT_MAX_DELETE_SHARE
from tierra.errors import ConfigError, InputError, Origin, Problem, errors_only

GROUPS = {"tierra": TIERRA_GROUP, "volcano": VOLCANO_GROUP}
KIND = "ControllerConfig"
DEFAULT_FILE_POLL = 10.0
DEFAULT_UFM_INTERVAL = 600.0
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


class SourceKind(enum.StrEnum):
    LABELS = "labels"
    IBNETDISCOVER = "ibnetdiscover"
    UFM = "ufm"
    SLURM = "slurm"
    DRA = "dra"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A namespaced object; ``namespace`` "" means the controller's own namespace."""

    name: str
    namespace: str = ""

    def __str__(self) -> str:
        return f"{self.namespace or '<own namespace>'}/{self.name}"


@dataclass(frozen=True, slots=True)
class TextInput:
    """Where a file-shaped input comes from: a path, or one key of a ConfigMap."""

    file: Path | None = None
    config_map: ObjectRef | None = None
    key: str = ""

    def __str__(self) -> str:
        if self.file is not None:
            return str(self.file)
        return f"ConfigMap {self.config_map} key {self.key}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceConfig:
    """One source: ``kind`` says which of the option groups below it uses."""

    kind: SourceKind
    owner: str
    prefix: str | None = None
    path: str = ""  # "sources[2]", for messages
    # labels
    topologies: tuple[LabelTopology, ...] = ()
    object_preset: str | None = None  # kueue / kai: levels read from Topology objects
    tier_names: Mapping[str, str] = field(default_factory=dict)  # label key -> tierName
    # ibnetdiscover, slurm, ufm (a saved response)
    inputs: tuple[TextInput, ...] = ()
    poll_seconds: float = DEFAULT_FILE_POLL
    host_pattern: str | None = None
    allow_partial: bool = False
    # ufm
    url: str | None = None
    credentials: ObjectRef | None = None
    interval_seconds: float = DEFAULT_UFM_INTERVAL
    insecure: bool = False
    ca_file: Path | None = None
    timeout: float = 30.0
    retries: int = 3

    @property
    def live(self) -> bool:
        """Driven by watched objects (Nodes, ResourceSlices) rather than files or a server."""
        return self.kind in (SourceKind.LABELS, SourceKind.DRA)

    def request(self, files: Sequence[Path]) -> registry.Request:
        """The ``tierra discover`` request for this source over ``files``."""
        return registry.Request(
            files=tuple(files),
            owner=self.owner,
            prefix=self.prefix,
            host_pattern=self.host_pattern,
            allow_partial=self.allow_partial,
        )


@dataclass(frozen=True, slots=True)
class SlurmExport:
    config_map: ObjectRef
    format: str  # "conf" or "yaml"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportConfig:
    kueue: bool = False
    kai: bool = False
    labels: bool = False
    slurm: SlurmExport | None = None

    @property
    def node_labels(self) -> bool:
        """Kueue and KAI read their levels from node labels, so either turns them on."""
        return self.labels or self.kueue or self.kai

    @property
    def any(self) -> bool:
        return self.node_labels or self.slurm is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    groups: tuple[str, ...] = (TIERRA_GROUP,)
    sources: tuple[SourceConfig, ...] = ()
    status_groups: tuple[str, ...] = (TIERRA_GROUP,)
    export: ExportConfig = field(default_factory=ExportConfig)
    max_delete_share: float = DEFAULT_MAX_DELETE_SHARE
    allow_mass_delete: bool = False
    resync_seconds: float = 300.0
    debounce_seconds: float = 0.2

    @property
    def primary_group(self) -> str:
        """The group exports and status read the topology from (the first written)."""
        return self.groups[0]


def parse_duration(value: Any) -> float | None:
    """Seconds from a number or a Go-style duration (``90s``, ``10m``, ``1h30m``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    m = _DURATION.match(value.strip())
    if not m or not any(m.groups()):
        return None
    h, mi, s = (float(g) if g else 0.0 for g in m.groups())
    return h * 3600 + mi * 60 + s


def _duration(f: Fields, key: str, default: float, minimum: float) -> float:
    if not f.has(key):
        return default
    seconds = parse_duration(f.raw(key))
    if seconds is None:
        f.problem(key, f"expected seconds or a duration such as 30s, 10m, 1h; got {f.raw(key)!r}")
        return default
    if seconds < minimum:
        f.problem(key, f"must be at least {minimum:g} seconds, got {seconds:g}")
        return default
    return seconds


def _ref(f: Fields, key: str) -> ObjectRef | None:
    """``name`` or ``{name, namespace}``."""
    raw = f.raw(key)
    if raw is None:
        return None
    if isinstance(raw, str):
        name, namespace = raw, ""
    elif isinstance(raw, Mapping):
        sub = f.obj(key)
        name = sub.string("name", required=True)
        namespace = sub.string("namespace")
    else:
        f.problem(key, f"expected a name or {{name, namespace}}, got {type(raw).__name__}")
        return None
    for what, value in (("name", name), ("namespace", namespace)):
        if value and (why := dns_subdomain_problem(value)):
            f.problem(key if isinstance(raw, str) else f"{key}.{what}", why)
            return None
    return ObjectRef(name, namespace) if name else None


def _inputs(f: Fields, kind: SourceKind) -> tuple[TextInput, ...]:
    out: list[TextInput] = []
    if f.has("file"):
        out.append(TextInput(file=Path(f.string("file"))))
    out += [TextInput(file=Path(p)) for p in f.str_list("files")]
    if f.has("configMap"):
        ref = _ref(f, "configMap")
        cm = f.obj("configMap") if isinstance(f.raw("configMap"), Mapping) else None
        key = (cm.string("key") if cm is not None else "") or f.string("key")
        if ref is not None:
            if not key:
                f.problem("configMap", "needs the key holding the data (configMap.key)")
            else:
                out.append(TextInput(config_map=ref, key=key))
    if not out and kind is not SourceKind.UFM:
        f.problem("", f"the {kind} source needs file, files or configMap")
    return tuple(out)


def _labels(f: Fields, src: dict[str, Any]) -> None:
    levels = f.str_list("levels")
    preset = f.opt_str("preset")
    tier_names = f.str_map("tierNames")
    if not levels and not preset:
        f.problem("", "the labels source needs levels ([NAME=]KEY,KEY,...) and/or a preset")
        return
    topologies: list[LabelTopology] = []
    try:
        if preset in presets.OBJECT_PRESETS:
            src["object_preset"] = preset
        elif preset is not None:
            topologies += presets.preset(preset)
        topologies += registry.level_topologies(levels, f.string("topologyName") or "labels")
        registry.check_unique_names(topologies)
    except ConfigError as exc:
        f.problem("levels" if levels else "preset", str(exc))
        return
    try:
        # Levels read from Kueue or KAI objects are only known live: checked there.
        strict = "object_preset" not in src
        topologies = with_tier_names(topologies, tier_names, strict=strict)
    except ConfigError as exc:
        f.problem("tierNames", str(exc))
        return
    src["topologies"] = tuple(topologies)
    src["tier_names"] = tier_names


def _ufm(f: Fields, src: dict[str, Any], inputs: tuple[TextInput, ...]) -> None:
    url = f.opt_str("url")
    if url:
        src["url"] = url
        creds = _ref(f, "credentialsSecret")
        if creds is None and not f.has("credentialsSecret"):
            f.problem("credentialsSecret", "is required with url (a Secret: username, password)")
        src["credentials"] = creds
    elif not inputs:
        f.problem("", "the ufm source needs url (and credentialsSecret) or a saved response")
    src["interval_seconds"] = _duration(f, "interval", DEFAULT_UFM_INTERVAL, 10.0)
    src["insecure"] = f.boolean("insecure")
    if f.has("caFile"):
        src["ca_file"] = Path(f.string("caFile"))
    src["timeout"] = _duration(f, "timeout", 30.0, 1.0)
    src["retries"] = f.integer("retries", 3, minimum=0)


def _source(f: Fields) -> SourceConfig | None:
    name = f.string("name", required=True)
    if not name:
        return None
    if name == "nvidia-smi":
        f.problem("name", "nvidia-smi reads one node: run `tierra discover nvidia-smi` on it")
        return None
    try:
        kind = SourceKind(name)
    except ValueError:
        f.problem("name", f"unknown source {name!r}; choose one of: {', '.join(SourceKind)}")
        return None
    owner = f.string("owner") or name
    if why := registry.owner_problem(owner):
        f.problem("owner", why)
    src: dict[str, Any] = {"kind": kind, "owner": owner, "path": f.path}
    if f.has("prefix"):
        src["prefix"] = f.string("prefix")
    if kind is SourceKind.LABELS:
        _labels(f, src)
    elif kind is not SourceKind.DRA:
        inputs = _inputs(f, kind)
        src["inputs"] = inputs
        src["poll_seconds"] = _duration(f, "pollInterval", DEFAULT_FILE_POLL, 1.0)
        if kind is SourceKind.UFM:
            _ufm(f, src, inputs)
            if len(inputs) > 1:
                f.problem("", "the ufm source reads one saved response")
    if kind in (SourceKind.IBNETDISCOVER, SourceKind.UFM) and f.has("hostPattern"):
        pattern = f.string("hostPattern")
        if isinstance(why_re := compile_pattern(pattern), str):
            f.problem("hostPattern", why_re)
        src["host_pattern"] = pattern
    if kind is SourceKind.IBNETDISCOVER:
        src["allow_partial"] = f.boolean("allowPartial")
    return SourceConfig(**src)


def _groups(f: Fields, key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    if not f.has(key):
        return default
    names = f.str_list(key)
    out: list[str] = []
    for i, n in enumerate(names):
        if n not in GROUPS:
            f.report.add(f"{f.at(key)}[{i}]", f"must be tierra or volcano, got {n!r}")
        elif GROUPS[n] not in out:
            out.append(GROUPS[n])
    if not out and not any(n not in GROUPS for n in names):
        f.problem(key, "needs at least one of tierra, volcano")
    return tuple(out) or default


def _export(f: Fields) -> ExportConfig:
    def flag(key: str) -> bool:
        raw = f.raw(key)
        if isinstance(raw, Mapping):
            return f.obj(key).boolean("enabled", True)
        return f.boolean(key)

    slurm: SlurmExport | None = None
    if f.has("slurm"):
        sf = f.obj("slurm")
        ref = _ref(sf, "configMap")
        fmt = sf.enum("format", ("conf", "yaml"), "yaml")
        if ref is None and not sf.has("configMap"):
            sf.problem("configMap", "is required (the ConfigMap to write topology.conf/yaml to)")
        if ref is not None:
            slurm = SlurmExport(ref, fmt)
    return ExportConfig(kueue=flag("kueue"), kai=flag("kai"), labels=flag("labels"), slurm=slurm)


def parse_config(data: Any, origin: Origin | None = None) -> ControllerConfig:
    """The configuration in ``data``; ``InputError`` with every problem found."""
    problems: list[Problem] = []
    if not isinstance(data, Mapping):
        raise InputError(Problem("expected a mapping of settings", origin, KIND))
    f = Fields(data, "", Report(origin, KIND, problems))
    known = {"apiVersion", "kind", "groups", "sources", "status", "export", "guard"}
    known |= {"resync", "debounce"}
    for key in data:
        if key not in known:
            f.problem(str(key), f"unknown setting; known: {', '.join(sorted(known))}")
    groups = _groups(f, "groups", (TIERRA_GROUP,))
    sources = tuple(s for s in (_source(sf) for sf in f.objects("sources")) if s is not None)
    if not f.has("sources") or (not sources and not problems):
        f.problem("sources", "needs at least one source")
    owners: dict[str, str] = {}
    for s in sources:
        if s.owner in owners:
            f.report.add(
                f"{s.path}.owner",
                f"{s.owner!r} is also the owner of {owners[s.owner]}; each source owns its "
                "HyperNodes alone, so give one of them another owner",
            )
        owners.setdefault(s.owner, s.path)
    status = f.obj("status")
    status_groups = _groups(status, "groups", groups)
    guard = f.obj("guard")
    share = guard.number("maxDeleteShare")
    if share is not None and not 0 <= share <= 1:
        guard.problem("maxDeleteShare", f"must be between 0 and 1, got {share:g}")
        share = None
    config = ControllerConfig(
        groups=groups,
        sources=sources,
        status_groups=status_groups,
        export=_export(f.obj("export")),
        max_delete_share=DEFAULT_MAX_DELETE_SHARE if share is None else share,
        allow_mass_delete=guard.boolean("allowMassDelete"),
        resync_seconds=_duration(f, "resync", 300.0, 10.0),
        debounce_seconds=_duration(f, "debounce", 0.2, 0.0),
    )
    errors = errors_only(problems)
    if errors:
        raise InputError(errors)
    return config


def load_config(path: Path) -> ControllerConfig:
    """Read and check a configuration file (YAML or JSON)."""
    data = read_yaml(path, expected="a controller configuration (YAML)")
    return parse_config(data, Origin(str(path), 1))


def config_from_text(text: str, where: str) -> ControllerConfig:
    """The configuration held in a ConfigMap key (``where`` names it in messages)."""
    return parse_config(parse_yaml(where, text), Origin(where, 1))
