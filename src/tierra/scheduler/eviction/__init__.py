"""Room made by evicting: preemption by priority, reclaim by queue share."""
