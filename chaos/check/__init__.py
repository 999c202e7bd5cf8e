"""Checkers for chaos histories: pure functions over recorded operations, no I/O.

A history is a list of `Op` records (Jepsen's shape: invoke, then ok, fail or
info, per process). `set_checker` judges a queue workload, `linearizable`
a register (read, write, compare-and-set) by the WGL search, `staleness`
counts Direct Get reads older than an acknowledged write.
"""
