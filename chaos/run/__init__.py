"""A chaos run: workloads on clients pinned to each node, faults on a seeded schedule, a liveness
check after every heal, a final read-back, the checkers, a report. See docs/chaos.md."""
