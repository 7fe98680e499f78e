"""The devices-in-use ledger agrees with a recount from every claim, whatever the order
of changes (two claims holding one device, admin access, claims gone, a shared set)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tierra.api.resource import Allocation, DeviceResult
from tierra.scheduler.devices.in_use import InUseLedger

DEVICES = [f"gpu-{i}" for i in range(4)]
Step = tuple[str, tuple[list[str], bool] | None]


def allocation(devices: tuple[str, ...], admin: bool) -> Allocation:
    results = tuple(
        DeviceResult(request="r", driver="gpu.example.com", pool="n", device=d, admin_access=admin)
        for d in devices
    )
    return Allocation(results=results)


step = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.none() | st.tuples(st.lists(st.sampled_from(DEVICES), max_size=3), st.booleans()),
)


def recount(claims: dict[str, Allocation]) -> set[tuple[str, str, str]]:
    return {r.device_id for a in claims.values() for r in a.results if not r.admin_access}


@given(st.lists(st.lists(step, max_size=4), max_size=6))
def test_the_ledger_matches_a_recount_after_every_sync(rounds: list[list[Step]]) -> None:
    ledger, claims = InUseLedger(), dict[str, Allocation]()
    earlier: list[tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]] = []
    for changes in rounds:
        for key, change in changes:
            if change is None:
                claims.pop(key, None)
            else:
                claims[key] = allocation(tuple(change[0]), change[1])
        ledger.sync(list(claims), claims.get)
        assert ledger.devices == recount(claims)
        earlier.append((ledger.share(), set(ledger.devices)))
    for shared, copy in earlier:
        assert shared == copy  # a set handed out is never changed afterwards
