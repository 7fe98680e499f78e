"""Queues: their tree, deserved shares, capability, order and status."""
