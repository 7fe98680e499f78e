"""What a compiled CEL selector reads of the device, so equal readings share one verdict.

A selector's verdict on a device depends only on what it reads of the ``device``
variable. Most read a handful of fixed places (``device.driver``,
``device.attributes["gpu.nvidia.com"].type``, ``device.capacity[d].memory``), and in a
cluster most devices agree on them: 16,000 devices of one GPU model and one NIC model
are two readings for a class selector. Evaluating once per distinct reading instead
of once per device is the same answer (the expression cannot tell two devices apart
that agree on everything it reads) at a fraction of the cost.

What it reads comes from the type-checked expression cel-cpp serializes
(``cel.expr.CheckedExpr``, cel-spec's ``checked.proto``/``syntax.proto``), read here
with a few lines of protobuf wire decoding (no protobuf runtime needed for one
message). Every use of ``device`` must be a chain of field selections or constant-string
indexes ending in a value: the top-level fields, or one attribute or capacity of one
domain. Anything else -- a domain's whole map used as a value (``"x" in
device.attributes[d]``, iteration, ``size``), an index that is not a constant string, a
comprehension variable named ``device`` -- makes the reading unknown (``None``), and the
selector is evaluated device by device as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

# Expr's fields (cel-spec syntax.proto); Select, Call, Ident, Constant, Comprehension
_ID, _CONST, _IDENT, _SELECT, _CALL, _LIST, _STRUCT, _COMPREHENSION = 2, 3, 4, 5, 6, 7, 8, 9
_MAPS = ("attributes", "capacity")
_INDEX = "_[_]"

Path = tuple[str, ...]  # ("driver",) or ("attributes", domain, name)


class _Unknown(Exception):
    """The expression uses ``device`` in a way this reading cannot follow."""


def _varint(data: bytes, i: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = data[i]
        i += 1
        out |= (b & 0x7F) << shift
        if not b & 0x80:
            return out, i
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of one message: ints for varints, bytes for the rest."""
    i = 0
    while i < len(data):
        tag, i = _varint(data, i)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, i = _varint(data, i)
            yield number, value
        elif wire == 2:
            size, i = _varint(data, i)
            yield number, data[i : i + size]
            i += size
        elif wire == 1:
            yield number, data[i : i + 8]
            i += 8
        elif wire == 5:
            yield number, data[i : i + 4]
            i += 4
        else:
            raise _Unknown(f"wire type {wire}")


def _message(data: bytes) -> dict[int, list[int | bytes]]:
    out: dict[int, list[int | bytes]] = {}
    for number, value in _fields(data):
        out.setdefault(number, []).append(value)
    return out


def _one(msg: dict[int, list[int | bytes]], number: int) -> bytes:
    value = msg.get(number, [b""])[-1]
    if not isinstance(value, bytes):
        raise _Unknown(f"field {number} is not a message")
    return value


def _text(msg: dict[int, list[int | bytes]], number: int) -> str:
    return _one(msg, number).decode()


@dataclass(slots=True)
class _Reader:
    reads: set[Path]

    def expr(self, data: bytes) -> Path | None:
        """A device path this expression is (None: a value that is not one)."""
        msg = _message(data)
        if _IDENT in msg:
            return ("",) if _text(_message(_one(msg, _IDENT)), 1) == "device" else None
        if _SELECT in msg:
            sel = _message(_one(msg, _SELECT))
            test_only = bool(sel.get(3, [0])[-1])
            path = self.expr(_one(sel, 1))
            if path is not None and path[0] in _MAPS and len(path) == 1:
                # device.attributes.d: a domain not named by a string literal is not
                # given an empty map when missing (cel.py), so its presence would count
                raise _Unknown("a domain selected as a field")
            return self._step(path, _text(sel, 2), test_only=test_only)
        if _CALL in msg:
            return self._call(_message(_one(msg, _CALL)))
        if _COMPREHENSION in msg:
            comp = _message(_one(msg, _COMPREHENSION))
            if "device" in (_text(comp, 1), _text(comp, 3), _text(comp, 8)):
                raise _Unknown("a comprehension variable named device")
            for number in (2, 4, 5, 6, 7):
                self.value(_one(comp, number))
            return None
        if _LIST in msg:
            for element in _message(_one(msg, _LIST)).get(1, []):
                self.value(element)  # type: ignore[arg-type]
            return None
        if _STRUCT in msg:
            for entry in _message(_one(msg, _STRUCT)).get(2, []):
                parts = _message(entry)  # type: ignore[arg-type]
                for number in (3, 4):
                    if number in parts:
                        self.value(_one(parts, number))
            return None
        return None  # a constant

    def value(self, data: bytes) -> None:
        """An expression used as a value: a device path in it must be a whole reading."""
        path = self.expr(data)
        if path is not None and not _leaf(path):
            raise _Unknown(f"device.{'.'.join(p for p in path if p)} used as a value")

    def _call(self, call: dict[int, list[int | bytes]]) -> Path | None:
        function = _text(call, 2)
        args = [a for a in call.get(3, []) if isinstance(a, bytes)]
        if function == _INDEX and len(args) == 2 and 1 not in call:
            target = self.expr(args[0])
            if target is not None and not _leaf(target):
                key = _constant_string(args[1])
                if key is None:
                    raise _Unknown("an index that is not a constant string")
                return self._step(target, key, test_only=False)
            if target is not None:
                self.reads.add(target)
            self.value(args[1])
            return None
        if 1 in call:
            self.value(_one(call, 1))  # a member call's receiver
        for a in args:
            self.value(a)
        return None

    def _step(self, path: Path | None, name: str, *, test_only: bool) -> Path | None:
        if path is None:
            return None
        if _leaf(path):
            self.reads.add(path)  # a field of a value: read the whole value
            return None
        grown = (name,) if path == ("",) else (*path, name)
        if test_only:
            if not _leaf(grown):
                raise _Unknown("has() on a map of device")
            self.reads.add(grown)
            return None
        if _leaf(grown):
            self.reads.add(grown)
        return grown


def _leaf(path: Path) -> bool:
    if path == ("",):
        return False
    if path[0] in _MAPS:
        return len(path) == 3
    return True


def _constant_string(data: bytes) -> str | None:
    msg = _message(data)
    if _CONST not in msg:
        return None
    const = _message(_one(msg, _CONST))
    return _text(const, 6) if 6 in const else None


def device_reads(serialized: bytes) -> frozenset[Path] | None:
    """The device paths a checked expression reads (None: it may read more)."""
    try:
        wrapper = _message(serialized)  # google.protobuf.Any: type_url 1, value 2
        checked = _message(_one(wrapper, 2)) if 2 in wrapper else wrapper
        reader = _Reader(set())
        reader.value(_one(checked, 4))  # CheckedExpr.expr
    except (_Unknown, IndexError, UnicodeDecodeError):
        return None
    return frozenset(reader.reads)
