"""Writing manifests back out: multi-document YAML or a JSON ``List``, stable key order."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

try:
    from yaml import CSafeDumper as _Dumper
except ImportError:  # pragma: no cover
    from yaml import SafeDumper as _Dumper  # type: ignore[assignment]


def dump_yaml(objects: Iterable[Mapping[str, Any]]) -> str:
    """Multi-document YAML that ``kubectl apply -f`` takes as it is."""
    docs = [dict(o) for o in objects]
    return yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def dump_json(objects: Iterable[Mapping[str, Any]]) -> str:
    return json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": [dict(o) for o in objects]}, indent=2
    )
