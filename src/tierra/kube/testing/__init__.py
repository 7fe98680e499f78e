"""Test support for tierra's Kubernetes edge: a real control plane and KWOK-style fake objects.

Shipped in the package (not only in ``tests/``) so benchmarks and people comparing tierra with
kube-scheduler on their own machine use the same code as the test suite.
"""

from tierra.kube.testing.controllers import ControllerManager
from tierra.kube.testing.controlplane import (
    ADMIN,
    ETCD_VERSION,
    HELM_VERSION,
    K8S_VERSION,
    KUBE_CONTROLLER_MANAGER,
    KUBE_SCHEDULER,
    Binaries,
    ControlPlane,
    ControlPlaneError,
    ControlPlaneUnavailable,
    Identity,
    ManagedProcess,
    cache_folder,
    find_binary,
)

__all__ = [
    "ADMIN",
    "ETCD_VERSION",
    "HELM_VERSION",
    "K8S_VERSION",
    "KUBE_CONTROLLER_MANAGER",
    "KUBE_SCHEDULER",
    "Binaries",
    "ControlPlane",
    "ControlPlaneError",
    "ControlPlaneUnavailable",
    "ControllerManager",
    "Identity",
    "ManagedProcess",
    "cache_folder",
    "find_binary",
]
