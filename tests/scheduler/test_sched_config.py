"""The configuration file: policies selected and weighted, every mistake with its path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tierra.errors import ConfigError
from tierra.scheduler import DegradedMode, SchedulerConfig, load_config, parse_config
from tierra.scheduler.scoring.binpack import Binpack


def test_defaults_are_binpack_topology_and_the_lookahead() -> None:
    config = SchedulerConfig()
    assert [wp.policy.name for wp in config.policies] == ["binpack", "topology", "lookahead"]
    assert config.scheduler_names == ("tierra",) and config.links == ()


def test_the_links_table(tmp_path: Path) -> None:
    f = tmp_path / "sched.yaml"
    f.write_text(
        "links:\n  node/NVIDIA-GB200: {bandwidthGBps: 1800}\n"
        "  aggregation: {bandwidthGBps: 100, oversubscription: 2}\n"
        "  core: {bandwidthGBps: -1}\n  spine: {bandwidthGBps: 100, oversubscription: 0.5}\n"
        "  leaf: {bandwidthGBps: 100, speed: fast}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(f)
    text = str(err.value)
    assert "links.core.bandwidthGBps: must be a number > 0" in text
    assert "links.spine.oversubscription: must be >= 1" in text
    assert "links.leaf.speed: unknown setting" in text
    f.write_text("links:\n  aggregation: {bandwidthGBps: 100, oversubscription: 2}\n")
    (entry,) = load_config(f).links
    assert entry[0] == "aggregation" and entry[1].effective_gbps == 50.0


def test_a_full_file(tmp_path: Path) -> None:
    f = tmp_path / "sched.yaml"
    f.write_text(
        """
schedulerNames: [tierra, volcano]
degradedHyperNodes: exclude
preemption: {enabled: false, maxDomains: 4}
policies:
  spread: {weight: 2}
  binpack: {weight: 0.5, resources: {cpu: 1, nvidia.com/gpu: 3}, fading: 0.5, normalPod: false}
"""
    )
    config = load_config(f)
    assert config.scheduler_names == ("tierra", "volcano")
    assert config.degraded is DegradedMode.EXCLUDE
    assert config.preemption is False and config.preemption_max_domains == 4
    assert [(wp.policy.name, wp.weight) for wp in config.policies] == [
        ("binpack", 0.5),
        ("spread", 2.0),
    ]
    binpack = config.policies[0].policy
    assert isinstance(binpack, Binpack)
    assert dict(binpack.resources) == {"cpu": 1.0, "nvidia.com/gpu": 3.0}
    assert binpack.fading == 0.5 and binpack.normal_pod is False


def test_every_mistake_is_reported_with_its_path(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        """
degradedHyperNodes: sometimes
preemtion: {enabled: true}
policies:
  binpak: {weight: 1}
  binpack: {weight: -1, fading: 2, resources: {cpu: lots}, colour: blue}
"""
    )
    with pytest.raises(ConfigError) as err:
        load_config(f)
    text = str(err.value)
    for want in (
        f"{f}: document 1: preemtion: unknown setting",
        "degradedHyperNodes: must be one of avoid, exclude, ignore; got 'sometimes'",
        "policies.binpak: unknown policy; known: binpack, spread, topology",
        "policies.binpack.weight: must be >= 0 (omit the policy to disable it), got -1",
        "policies.binpack.fading: must be between 0 and 1, got 2",
        "policies.binpack.resources.cpu: expected a number, got a string 'lots'",
        "policies.binpack.colour: unknown argument of policy binpack",
    ):
        assert want in text, want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        pytest.param("policies: [binpack]", "policies: expected an object", id="list"),
        pytest.param("- just\n- a list", "expected a mapping of settings", id="not-a-mapping"),
        pytest.param("policies: {binpack: {weight: 1}", "invalid YAML", id="broken-yaml"),
    ],
)
def test_malformed_files(tmp_path: Path, text: str, want: str) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=want):
        load_config(f)


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config("/nonexistent/sched.yaml")


def test_empty_file_means_defaults() -> None:
    assert parse_config(None) == SchedulerConfig()
