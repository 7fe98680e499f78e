"""The Kubernetes edge of tierra: manifests, and helpers to test against a real control plane.

Nothing in tierra's core imports this package, so the core runs without a cluster and without
the Kubernetes client installed.
"""
