"""A gang's pods in order: ``sort_pods``'s fast path for ``name-<n>`` orders as the
natural key does, ties and odd names included."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tierra.scheduler.gang import pod_order, sort_pods
from tierra.scheduler.testing import pod

# stems that take the fast path and stems that must not (ending in a decimal digit that
# is not ASCII joins the number; an empty stem; two stems)
_STEMS = st.sampled_from(["job-", "a", "", "a\u0663", "x1y", "job-7-"])
_SUFFIX = st.one_of(st.integers(0, 40).map(str), st.integers(0, 40).map(lambda i: f"{i:03d}"))


@given(
    st.lists(
        st.tuples(_STEMS, _SUFFIX, st.sampled_from([0, 0, 5])),
        min_size=0,
        max_size=12,
    ),
    st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_sort_pods_orders_as_the_natural_key(
    parts: list[tuple[str, str, int]], one_stem: bool
) -> None:
    if one_stem and parts:
        parts = [(parts[0][0], s, p) for _, s, p in parts]
    pods = [pod(f"{stem}{suffix}", priority=prio) for stem, suffix, prio in parts]
    fast, slow = list(pods), list(pods)
    sort_pods(fast)
    slow.sort(key=pod_order)
    assert [id(p) for p in fast] == [id(p) for p in slow]


def test_a_name_without_a_number_is_sorted_by_its_natural_key() -> None:
    pods = [pod("w2"), pod("w"), pod("w10")]
    sort_pods(pods)
    assert [p.name for p in pods] == ["w", "w2", "w10"]
