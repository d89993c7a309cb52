"""The KV cache's sequence table: which sequence slots are in use and how many tokens each
holds (``docs/kvcache.md``)."""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["SequenceTable"]


class SequenceTable(wiring.Component):
    """``max_seqs`` sequence slots: each active or not, with its length in tokens.

    ``ok`` and ``length`` answer for sequence ``seq`` in the same cycle (``ok``: ``seq`` is
    below ``max_seqs`` and active). ``new_id`` is the lowest free slot and ``slot_free``
    whether there is one, registered: a write shows in them from the second cycle after it. A
    cycle with ``set_active`` writes slot ``wseq``'s active bit (``wactive``), one with
    ``set_length`` its length (``wlength``).

    Attributes
    ----------
    seq : In(seq_bits)
    ok : Out(1)
    length : Out(token_bits)
    new_id : Out(range(max_seqs)), slot_free : Out(1)
    wseq : In(seq_bits)
    set_active, wactive, set_length : In(1)
    wlength : In(token_bits)
    """

    def __init__(self, max_seqs: int, seq_bits: int, token_bits: int):
        self._seqs = max_seqs
        super().__init__({
            "seq": In(seq_bits), "ok": Out(1), "length": Out(token_bits),
            "new_id": Out(range(max(max_seqs, 2))), "slot_free": Out(1),
            "wseq": In(seq_bits), "set_active": In(1), "wactive": In(1), "set_length": In(1),
            "wlength": In(token_bits),
        })

    def elaborate(self, platform):
        m = Module()
        S = self._seqs
        active = Signal(S)
        length = Array(Signal.like(self.length, name=f"length{s}") for s in range(S))
        index = len(self.new_id)
        m.d.comb += [self.ok.eq((self.seq < S) & active.bit_select(self.seq[:index], 1)),
                     self.length.eq(length[self.seq])]
        # The lowest free slot, registered (off the decode path): ``active`` changes only in
        # the cycle before an answer, so this is current again by the next decode.
        m.d.sync += self.slot_free.eq(0)
        for s in reversed(range(S)):
            with m.If(~active[s]):
                m.d.sync += [self.slot_free.eq(1), self.new_id.eq(s)]
        with m.If(self.set_active):
            m.d.sync += active.bit_select(self.wseq[:index], 1).eq(self.wactive)
        with m.If(self.set_length):
            m.d.sync += length[self.wseq].eq(self.wlength)
        return m
