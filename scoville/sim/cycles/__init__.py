"""Timed models: from a block's config, transactions and stream schedules, the cycle of every
handshake and every counter; the RTL meets each of them exactly. Closed forms are their fast
paths."""
