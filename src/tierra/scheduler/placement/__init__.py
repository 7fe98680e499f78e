"""Placing one gang: its plan, the domain search, node distribution inside a domain,
and the allocator that drives them.
"""
