"""The controller's configuration: what it accepts, and every mistake named by field path."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from tierra.api.hypernode import TIERRA_GROUP, VOLCANO_GROUP
from tierra.errors import InputError
from tierra.kube.controller.config import (
    ObjectRef,
    SourceKind,
    config_from_text,
    load_config,
    parse_config,
    parse_duration,
)
from tierra.kube.controller.runner import ConfigWatch
from tierra.kube.informer import Event, EventType

FULL = """
groups: [tierra, volcano]
sources:
- name: labels
  levels: ["rack=topology.kubernetes.io/zone,example.com/rack"]
- name: labels
  owner: labels-eks
  preset: eks
- name: ibnetdiscover
  configMap: {name: fabric, key: ibnetdiscover.txt}
  hostPattern: '^(\\S+)'
  pollInterval: 5s
- name: ufm
  url: https://ufm.example.com
  credentialsSecret: {name: ufm-credentials, namespace: fabric}
  interval: 1h30m
- name: slurm
  files: [/etc/slurm/topology.conf]
- name: dra
status: {groups: [tierra]}
export:
  kueue: true
  kai: {enabled: false}
  slurm: {configMap: slurm-topology, format: conf}
guard: {maxDeleteShare: 0.25}
"""


def problems_of(data: Any) -> list[str]:
    with pytest.raises(InputError) as info:
        parse_config(data)
    return [str(p) for p in info.value.problems]


def test_a_full_configuration_reads_back() -> None:
    config = config_from_text(FULL, "ConfigMap tierra-system/tierra-controller key config.yaml")
    assert config.groups == (TIERRA_GROUP, VOLCANO_GROUP)
    assert config.primary_group == TIERRA_GROUP
    kinds = [s.kind for s in config.sources]
    assert kinds == [
        SourceKind.LABELS,
        SourceKind.LABELS,
        SourceKind.IBNETDISCOVER,
        SourceKind.UFM,
        SourceKind.SLURM,
        SourceKind.DRA,
    ]
    labels, eks, ib, ufm, slurm, dra = config.sources
    assert [t.name for t in labels.topologies] == ["rack"]
    assert [lv.key for lv in labels.topologies[0].levels] == [
        "topology.kubernetes.io/zone",
        "example.com/rack",
    ]
    assert eks.owner == "labels-eks" and {t.name for t in eks.topologies} >= {"eks"}
    assert ib.inputs[0].config_map == ObjectRef("fabric") and ib.inputs[0].key
    assert ib.poll_seconds == 5.0 and ib.host_pattern == r"^(\S+)"
    assert ufm.credentials == ObjectRef("ufm-credentials", "fabric")
    assert ufm.interval_seconds == 5400.0
    assert slurm.inputs[0].file == Path("/etc/slurm/topology.conf")
    assert dra.live and labels.live and not ib.live
    assert config.status_groups == (TIERRA_GROUP,)
    assert config.export.kueue and not config.export.kai and config.export.node_labels
    assert config.export.slurm is not None and config.export.slurm.format == "conf"
    assert config.max_delete_share == 0.25


def test_minimal_configuration_defaults() -> None:
    config = parse_config({"sources": [{"name": "dra"}]})
    assert config.groups == (TIERRA_GROUP,)
    assert config.status_groups == (TIERRA_GROUP,)
    assert not config.export.any
    assert config.max_delete_share == 0.5 and not config.allow_mass_delete


@pytest.mark.parametrize(
    ("data", "want"),
    [
        pytest.param({}, "ControllerConfig: sources: needs at least one source", id="no-sources"),
        pytest.param(
            {"sources": [{"name": "magic"}]},
            "sources[0].name: unknown source 'magic'; choose one of: labels, ibnetdiscover",
            id="unknown-source",
        ),
        pytest.param(
            {"sources": [{"name": "nvidia-smi"}]},
            "sources[0].name: nvidia-smi reads one node",
            id="node-local-source",
        ),
        pytest.param(
            {"sources": [{"name": "labels"}]},
            "sources[0]: the labels source needs levels",
            id="labels-without-levels",
        ),
        pytest.param(
            {"sources": [{"name": "labels", "levels": ["a,a"]}]},
            "sources[0].levels: topology 'labels': label 'a' is listed twice",
            id="repeated-level",
        ),
        pytest.param(
            {"sources": [{"name": "labels", "preset": "aws"}]},
            "sources[0].preset: unknown preset 'aws'",
            id="unknown-preset",
        ),
        pytest.param(
            {"sources": [{"name": "ibnetdiscover"}]},
            "sources[0]: the ibnetdiscover source needs file, files or configMap",
            id="ib-without-input",
        ),
        pytest.param(
            {"sources": [{"name": "ibnetdiscover", "configMap": {"name": "fabric"}}]},
            "sources[0].configMap: needs the key holding the data",
            id="configmap-without-key",
        ),
        pytest.param(
            {"sources": [{"name": "ibnetdiscover", "file": "/x", "hostPattern": "(a"}]},
            "sources[0].hostPattern: ",
            id="bad-host-regex",
        ),
        pytest.param(
            {"sources": [{"name": "ufm", "url": "https://ufm"}]},
            "sources[0].credentialsSecret: is required with url",
            id="ufm-without-secret",
        ),
        pytest.param(
            {"sources": [{"name": "ufm", "url": "https://u", "credentialsSecret": "Bad_Name"}]},
            "sources[0].credentialsSecret: 'Bad_Name' is not a DNS subdomain",
            id="bad-secret-name",
        ),
        pytest.param(
            {"sources": [{"name": "slurm", "file": "/t", "pollInterval": "soon"}]},
            "sources[0].pollInterval: expected seconds or a duration",
            id="bad-duration",
        ),
        pytest.param(
            {"sources": [{"name": "dra", "owner": "bad owner!"}]},
            "sources[0].owner: 'bad owner!' is not a label value",
            id="bad-owner",
        ),
        pytest.param(
            {"sources": [{"name": "dra"}, {"name": "dra"}]},
            "sources[1].owner: 'dra' is also the owner of sources[0]",
            id="shared-owner",
        ),
        pytest.param(
            {"groups": ["kueue"], "sources": [{"name": "dra"}]},
            "groups[0]: must be tierra or volcano, got 'kueue'",
            id="bad-group",
        ),
        pytest.param(
            {"sources": [{"name": "dra"}], "export": {"slurm": {"format": "json"}}},
            "export.slurm.format: must be one of conf, yaml",
            id="bad-slurm-export",
        ),
        pytest.param(
            {"sources": [{"name": "dra"}], "guard": {"maxDeleteShare": 2}},
            "guard.maxDeleteShare: must be between 0 and 1",
            id="bad-fraction",
        ),
        pytest.param(
            {"sources": [{"name": "dra"}], "sauces": []},
            "ControllerConfig: sauces: unknown setting",
            id="typo-setting",
        ),
        pytest.param([1, 2], "expected a mapping of settings", id="not-a-mapping"),
    ],
)
def test_mistakes_are_named_by_field(data: Any, want: str) -> None:
    found = problems_of(data)
    assert any(want in p for p in found), found


def test_every_mistake_is_reported_at_once() -> None:
    found = problems_of(
        {
            "groups": ["nope"],
            "sources": [{"name": "magic"}, {"name": "slurm"}],
            "guard": {"maxDeleteShare": -1},
        }
    )
    assert len(found) == 4, found


def test_load_config_reports_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("sources: [\n")
    with pytest.raises(InputError, match=r"config.yaml: line \d+ column \d+: invalid YAML"):
        load_config(path)
    path.write_text(yaml.safe_dump({"sources": [{"name": "magic"}]}))
    with pytest.raises(InputError, match=r"config.yaml: document 1: ControllerConfig: sources"):
        load_config(path)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(30, 30.0), (1.5, 1.5), ("90s", 90.0), ("10m", 600.0), ("1h30m", 5400.0), ("0.5s", 0.5)],
)
def test_durations(text: Any, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "10x", True, None, "m"])
def test_bad_durations(text: Any) -> None:
    assert parse_duration(text) is None


def test_a_watched_configuration_applies_valid_changes_and_keeps_running_on_bad_ones() -> None:
    async def body() -> None:
        watch = ConfigWatch(namespace="tierra-system", name="cfg")

        def put(text: str | None) -> None:
            obj = None if text is None else {"data": {"config.yaml": text}}
            kind = EventType.DELETED if text is None else EventType.MODIFIED
            watch._on_event(Event(kind, "tierra-system/cfg", obj))

        put("sources: [{name: dra}]\n")
        assert watch.loaded.is_set() and watch.current is not None
        first, seen = watch.current, watch.changed.generation
        put("sources: [{name: dra}]\n# a comment changes nothing\n")
        assert watch.changed.generation == seen  # the same configuration: no restart
        put("sources: [{name: magic}]\n")
        assert watch.current is first and "sources[0].name: unknown source" in watch.error
        put(None)
        assert watch.current is first and "was deleted" in watch.error
        put("groups: [volcano]\nsources: [{name: dra}]\n")
        assert watch.changed.generation == seen + 1 and watch.error == ""
        assert watch.current is not None and watch.current.groups == (VOLCANO_GROUP,)

    asyncio.run(body())
