"""The labels source's ``tierNames`` (issue 22): read from the controller's configuration,
every mistake named by field path, and written as each HyperNode's ``tierName`` by the
controller against the real API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from controller_helpers import KEY, TIERRA, cleanup, controller, make_nodes, owned, racks
from kube_helpers import eventually, kube_for

from tierra.errors import InputError
from tierra.kube.controller.config import parse_config
from tierra.kube.controller.metrics import Metrics
from tierra.kube.testing import ControlPlane

LEVELS = [f"named={KEY}/block,{KEY}/rack"]


def _source(**settings: Any) -> dict[str, Any]:
    return {"name": "labels", "owner": "named", "levels": LEVELS, **settings}


def test_tier_names_name_the_levels() -> None:
    config = parse_config(
        {"sources": [_source(tierNames={f"{KEY}/rack": "rack", f"{KEY}/block": "block"})]}
    )
    (topo,) = config.sources[0].topologies
    assert [(lv.key, lv.tier_name) for lv in topo.levels] == [
        (f"{KEY}/block", "block"),
        (f"{KEY}/rack", "rack"),
    ]


def test_without_tier_names_a_level_is_named_by_its_key() -> None:
    (topo,) = parse_config({"sources": [_source()]}).sources[0].topologies
    assert [lv.tier_name for lv in topo.levels] == [None, None]


@pytest.mark.parametrize(
    ("names", "want"),
    [
        ({f"{KEY}/rak": "rack"}, f"sources[0].tierNames: tier names for label(s) no level reads: {KEY}/rak"),  # noqa: E501
        ({f"{KEY}/rack": ""}, "sources[0].tierNames: the tier name for label"),
        ("rack", "sources[0].tierNames: expected an object of strings"),
    ],
)  # fmt: skip
def test_bad_tier_names_are_named_by_field(names: Any, want: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_config({"sources": [_source(tierNames=names)]})
    found = [str(p) for p in caught.value.problems]
    assert any(want in p for p in found), found


@pytest.mark.kube
def test_the_controller_writes_the_tier_names(tierra_plane: ControlPlane) -> None:
    nodes = racks("named", 4)
    config = parse_config(
        {
            "sources": [_source(tierNames={f"{KEY}/rack": "rack", f"{KEY}/block": "block"})],
            "debounce": 0.05,
        }
    )

    async def body() -> None:
        async with kube_for(tierra_plane) as kube:
            await make_nodes(kube, nodes)
            try:
                async with controller(tierra_plane, Metrics(), config=config):

                    async def named() -> bool:
                        got = await owned(kube, TIERRA, "named")
                        tiers = {n: o["spec"].get("tierName") for n, o in got.items()}
                        return tiers == {
                            "named-b0": "block",
                            "named-b0-r0": "rack",
                            "named-b0-r1": "rack",
                        }

                    await eventually(named, 15, "three HyperNodes named block and rack")
            finally:
                await cleanup(kube, ["named"], nodes)

    asyncio.run(body())
