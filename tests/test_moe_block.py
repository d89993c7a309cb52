"""The MoE block (:class:`scoville.rtl.moe.Moe`) in Amaranth's simulator: what its cocotb
testbench (``scoville/testbenches/moe.py``, ``tests/test_moe.py::test_moe_rtl``: outputs bit for
bit, every handshake against the timed model, on both simulators) does not see: the status of a
refused batch."""

from amaranth.sim import Simulator

from scoville.rtl.lib.params import build_config
from scoville.rtl.moe import Moe, MoeConfig, Status

from .amsim import Edges, send

#: Small blocks: 4 experts of 32 x 32, top-2, batches of 2, a 2 x 8 array, a 64-bit weight
#: port.
SMALL = {"experts": 4, "top_k": 2, "hidden": 32, "intermediate": 32, "tokens": 2,
         "array.rows": 2, "array.cols": 8, "weight_port_bits": 64}


def test_a_batch_of_no_tokens_or_too_many_is_refused_and_nothing_is_taken():
    """``tokens`` 0 or above the config's: status ``bad_tokens``, no ``x`` taken, no weight
    requested, and the block takes the next command."""
    cfg = build_config(MoeConfig, SMALL)
    dut = Moe(cfg)
    seen = []

    async def bench(ctx):
        edges = Edges()
        ctx.set(dut.x.valid, 1)
        ctx.set(dut.req.ready, 1)
        for tokens in (0, cfg.tokens + 1):
            await send(ctx, dut.cmd, {"tokens": tokens}, edges)
            ctx.set(dut.cmd.valid, 0)
            for _ in range(20):
                seen.append((ctx.get(dut.x.ready), ctx.get(dut.req.valid)))
                await edges.tick(ctx)
            seen.append(ctx.get(dut.status))
        seen.append(ctx.get(dut.cmd.ready))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert seen[20] == seen[41] == Status.BAD_TOKENS
    assert not any(x or r for x, r in seen[:20] + seen[21:41])
    assert seen[-1] == 1


def test_a_one_token_block_has_no_zero_width_signals():
    """``tokens`` 1 (and one choice a token): no ``[-1:0]`` vectors, which Verilator refuses."""
    from amaranth.back import verilog

    cfg = build_config(MoeConfig, {**SMALL, "tokens": 1, "top_k": 1})
    text = verilog.convert(Moe(cfg), name="moe")
    assert "[-1:0]" not in text
