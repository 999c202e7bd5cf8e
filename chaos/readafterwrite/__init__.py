"""The read-after-write demonstration: what each read path returns right after a write, under injected lag.

A writer updates keys of an R3 stream and reads each one back three ways:
the leader's coherent STREAM.MSG.GET, Direct Get through every responder
(replicas and a mirror_direct mirror), and Direct Get with `min_last_seq`
set to the PubAck's sequence. Latency toxics slow one follower's links and
the mirror's; the numbers show which paths return stale data and what each
path costs.
"""
