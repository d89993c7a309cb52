"""Signatures of memory-like ports between components, seen from the side that drives the
address (a component that serves them takes them ``In(...)``, which flips every member)."""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["read_port", "write_port"]


def read_port(addr, shape, *, enable: bool = False) -> wiring.Signature:
    """A synchronous read port: ``data`` holds the word at the ``addr`` of the previous cycle
    (with ``enable``: of the latest cycle where ``en`` was high, and holds while it is low)."""
    members = {"addr": Out(addr), "data": In(shape)}
    if enable:
        members["en"] = Out(1)
    return wiring.Signature(members)


def write_port(addr, shape) -> wiring.Signature:
    """A write port: ``data`` is written at ``addr`` at the end of a cycle where ``en`` is
    high."""
    return wiring.Signature({"addr": Out(addr), "data": Out(shape), "en": Out(1)})
