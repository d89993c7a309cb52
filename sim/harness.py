"""A simulation top that lets a cocotb testbench step a block's streams with one simulator
callback per cycle.

A handshake happens at a rising edge, on values that are gone just after it. To see it, a
testbench would wake twice per cycle (drive after the falling edge, sample in the read-only
phase before the rising one). :class:`StreamHarness` registers, for every stream, whether it
fired at the last rising edge and, for every output stream, the payload it handed over; the
testbench reads those just after the falling edge and drives the next cycle's inputs in the
same callback.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import Out

__all__ = ["StreamHarness", "stream_names"]


def stream_names(component: wiring.Component) -> list[str]:
    """The stream members of ``component``, in signature order (the order of the harness's
    ``fired`` bits)."""
    return [name for name, member in component.signature.members.items()
            if member.is_signature and isinstance(member.signature, stream.Signature)]


class StreamHarness(wiring.Component):
    """``dut`` with the same ports, plus:

    Attributes
    ----------
    fired : Out(number of streams)
        Bit ``k``: stream ``streams[k]`` handed over a beat at the last rising edge.
    NAME_taken : Out(payload shape)
        For each output stream ``NAME``: the payload of its latest handshake.
    streams : list of str
        The stream members of ``dut``, in signature order.
    """

    def __init__(self, dut: wiring.Component):
        self._dut = dut
        members = dict(dut.signature.members.items())
        self.streams = stream_names(dut)
        extra = {"fired": Out(max(len(self.streams), 1))}
        for name in self.streams:
            if members[name].flow == Out:
                extra[f"{name}_taken"] = Out(members[name].signature.members["payload"].shape)
        super().__init__({**members, **extra})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self._dut
        for name, member in dut.signature.members.items():
            outer, inner = getattr(self, name), getattr(dut, name)
            if member.is_port:
                if member.flow == Out:
                    m.d.comb += outer.eq(inner)
                else:
                    m.d.comb += inner.eq(outer)
            else:
                wiring.connect(m, wiring.flipped(outer), inner)
        fired = Signal.like(self.fired)
        for k, name in enumerate(self.streams):
            s = getattr(dut, name)
            m.d.sync += fired[k].eq(s.valid & s.ready)
            if hasattr(self, f"{name}_taken"):
                with m.If(s.valid & s.ready):
                    m.d.sync += getattr(self, f"{name}_taken").eq(s.payload)
        m.d.comb += self.fired.eq(fired)
        return m
