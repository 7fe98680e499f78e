"""A pending pod's devices as room: a firstAvailable request counts its smallest
alternative, so a node that only its later alternatives fit is not refused by counting."""

from __future__ import annotations

from tests.scheduler.dra_builders import GPU, claim

from tierra.scheduler.devices.counts import pending_requests, resource_name


def test_first_available_counts_the_fewest_devices_it_may_take() -> None:
    c = claim(
        "c",
        {
            "name": "g",
            "firstAvailable": [
                {"name": "many", "deviceClassName": GPU, "count": 16},
                {"name": "few", "deviceClassName": GPU, "count": 2},
            ],
        },
    )
    assert pending_requests([c], {}) == {resource_name(GPU): 2000}


def test_alternatives_over_two_classes_count_nothing() -> None:
    c = claim(
        "c",
        {
            "name": "g",
            "firstAvailable": [
                {"name": "a", "deviceClassName": GPU, "count": 1},
                {"name": "b", "deviceClassName": "other", "count": 1},
            ],
        },
    )
    assert pending_requests([c], {}) == {}
