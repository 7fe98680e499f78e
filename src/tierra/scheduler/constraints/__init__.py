"""Constraints on where a gang may go: the protocol, one module per constraint, and
the registry that lists them by hand.
"""
