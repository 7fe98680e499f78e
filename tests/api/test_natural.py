"""One natural sort key for every name tierra orders (pods, sub-groups, hosts)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tierra.api.natural import natural_key


def test_numbers_inside_names_sort_by_value() -> None:
    names = ["node-10", "node-2", "node-1", "node", "node-02", "a10b2", "a10b10", "a9"]
    assert sorted(names, key=natural_key) == [
        "a9",
        "a10b2",
        "a10b10",
        "node",
        "node-1",
        "node-2",
        "node-02",
        "node-10",
    ]


@pytest.mark.parametrize("text", ["1²2", "²", "x³-4", "٣٤", "p-１２"])
def test_digit_like_characters_never_crash(text: str) -> None:
    # "²".isdigit() is true but int("²") raises: the key must not trust isdigit
    key = natural_key(text)
    assert isinstance(key[0], str)
    assert sorted([text, "0", "p-1"], key=natural_key)  # comparable with any other key


@given(st.lists(st.text(max_size=8), max_size=12))
def test_any_two_names_compare(names: list[str]) -> None:
    keys = sorted(map(natural_key, names))  # a TypeError here would be a crash in a session
    assert all(a <= b for a, b in itertools.pairwise(keys))
