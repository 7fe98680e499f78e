"""Kubernetes manifests shipped inside the package, so an installed tierra can set up a cluster.

The CRDs are plain YAML files: ``kubectl apply -f`` works on the folder, and code reads them
through :func:`crd_files` so the installed copy is always the one used.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def crd_folder() -> Path:
    """The folder of CRD manifests, one CustomResourceDefinition per file."""
    return Path(str(resources.files(__name__).joinpath("crds")))


def crd_files() -> list[Path]:
    """The CRD manifests in a stable order."""
    return sorted(crd_folder().glob("*.yaml"))
