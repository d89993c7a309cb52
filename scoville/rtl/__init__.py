"""Synthesizable Amaranth RTL of Scoville's blocks. Nothing here imports :mod:`scoville.sim`."""
