"""Words: reasons, traces and refusals, written off the hot path from what the
placement steps report.
"""
