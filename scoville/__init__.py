"""Scoville: chip-architecture exploration for LLM-inference accelerators, in Amaranth HDL."""

__version__ = "0.1.0"
