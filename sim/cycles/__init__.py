"""Cycle models: the RTL meets each of them exactly."""
