"""The scheduler's state: the long-lived store an adapter feeds, the undo logs of a
session's tentative placements, and what sessions remember between runs.
"""
