"""Energy from switching activity (``scoville synth --energy``): the coverage reader, the
memories' access counts, the SRAM and node factors, and one measured block."""

import io
import json
import shutil
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from scoville.blocks import get_block, parse_params
from scoville.cli import main
from scoville.sim.energy import coverage, measure, memory_accesses
from scoville.sim.synth import NODES, SRAM_45NM, sram_pj_per_bit, stillmaker


def test_sram_energy_passes_through_horowitz_points_and_grows_with_size():
    for size, pj64 in SRAM_45NM:
        assert sram_pj_per_bit(size) == pytest.approx(pj64 / 64)
    sizes = [256, 2048, 8192, 20_000, 32768, 300_000, 1 << 20, 1 << 22]
    energies = [sram_pj_per_bit(s) for s in sizes]
    assert energies == sorted(energies) and len(set(energies)) == len(energies)
    # Below 8 KB: the 8-32 KB slope (energy as the square root of size).
    assert sram_pj_per_bit(2048) == pytest.approx(10 / 64 / 2)
    assert sram_pj_per_bit(8192, "n7") == pytest.approx(10 / 64 * NODES["n7"].energy_vs_45nm)


def test_node_energy_factors_are_stillmakers():
    assert stillmaker("45", 0.9) == pytest.approx(1.0)
    # Their HP 7 nm at 0.7 V against HP 45 nm at 0.9 V: about 0.068.
    assert NODES["n7"].energy_vs_45nm == pytest.approx(0.0684, abs=5e-4)
    order = [NODES[n].energy_vs_45nm for n in ("n5", "n7", "n16", "45nm")]
    assert order == sorted(order)


def _point(page, line, what, hier, count):
    fields = {"f": "x.v", "l": str(line), "n": "1", "page": page, "o": what, "h": hier}
    return "C '" + "".join(f"\x01{k}\x02{v}" for k, v in fields.items()) + f"' {count}\n"


def test_coverage_sums_both_directions_per_bit_and_keeps_to_the_module(tmp_path):
    path = tmp_path / "coverage.dat"
    path.write_text("# SystemC::Coverage-3\n" + "".join([
        _point("v_toggle/top_dut", 5, "bus[2]:0->1", "top.dut", 7),
        _point("v_toggle/top_dut", 5, "bus[2]:1->0", "top.dut", 6),
        _point("v_toggle/top_dut", 5, "bus[0]:0->1", "top.dut", 1),
        _point("v_toggle/top_dut", 6, "bit:0->1", "top.dut", 3),
        _point("v_toggle/top_dut", 6, "bit:1->0", "top.dut", 3),
        _point("v_toggle/top", 5, "other:0->1", "top", 99),
        _point("v_branch/top_dut", 9, "if", "top.dut", 40),
        _point("v_branch/top_dut", 9, "else", "top.dut", 60),
        _point("v_line/top_dut", 8, "block", "top.dut", 100),
        _point("v_line/top", 8, "block", "top", 500),
    ]))
    toggles, branches, cycles = coverage(path, "top_dut")
    assert toggles == {5: {2: 13, 0: 1}, 6: {-1: 6}}
    assert branches == {9: {"if": 40, "else": 60}}
    assert cycles == 100


NETLIST = """module m(clk);
  reg [31:0] \\buf.mem  [63:0];
  initial begin
    \\buf.mem [0] = 32'd0;
  end
  always @(posedge clk) begin
    if (\\buf.wen [0])
      \\buf.mem [\\buf.waddr ][15:0] <= \\buf.wdata [15:0];
    if (\\buf.wen [16])
      \\buf.mem [\\buf.waddr ][31:16] <= \\buf.wdata [31:16];
  end
  reg [31:0] _0_;
  always @(posedge clk) begin
    if (\\buf.ren ) begin
      _0_ <= \\buf.mem [\\buf.raddr ];
    end
  end
  reg [7:0] tab [3:0];
  assign t = tab[sel];
endmodule
"""


def test_memory_accesses_are_their_enables_branch_counts():
    lines = NETLIST.splitlines()
    at = {text.strip(): i for i, text in enumerate(lines, 1)}  # coverage lines are 1-based
    branches = {at["if (\\buf.wen [0])"]: {"if": 30}, at["if (\\buf.wen [16])"]: {"if": 12},
                at["if (\\buf.ren ) begin"]: {"if": 25}}
    mems = {m["name"]: m for m in memory_accesses(NETLIST, branches, cycles=100)}
    # Two enable slices of one write port: the most of them, not their sum.
    assert mems["buf.mem"] == {"name": "buf.mem", "width": 32, "words": 64, "reads": 25,
                               "writes": 30}
    # An asynchronous read port reads every cycle; the initializer is not a write.
    assert mems["tab"] == {"name": "tab", "width": 8, "words": 4, "reads": 100, "writes": 0}


def test_energy_needs_a_block_with_an_operation(capsys):
    assert main(["synth", "fp4_mul", "--energy"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no operation" in err and "gemm" in err and "\n" not in err


def test_a_block_that_does_not_elaborate_is_one_line(capsys, monkeypatch):
    import scoville.synth_command as cmd

    block = get_block("fp4_mul")

    def broken(config):
        raise ValueError("lanes must fit\nsecond line")

    monkeypatch.setattr(cmd, "get_block", lambda name: type(block)(
        **{**block.__dict__, "component": broken}))
    assert main(["synth", "fp4_mul"]) == 2
    err = capsys.readouterr().err.strip()
    assert "does not elaborate" in err and "lanes must fit" in err and "\n" not in err


needs_tools = pytest.mark.skipif(shutil.which("yosys") is None, reason="no yosys")

#: A small KV cache: 2 banks of 64 words, lines of 16 bf16 values.
KV = {"banks": 2, "word_bits": 32, "bank_words": 64, "page_tokens": 2, "max_seqs": 2,
      "kv_heads": 1, "head_dim": 16, "gap": 0.0, "backpressure": 0.0}


def _cli_energy(params: dict, node: str) -> dict:
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["synth", "kvcache", *(a for k, v in params.items()
                                           for a in ("--param", f"{k}={v}")),
                     "--node", node, "--energy", "--json"]) == 0
    return json.loads(out.getvalue())


@pytest.mark.sim
@needs_tools
def test_kvcache_energy_counts_every_bank_write_and_scales_with_the_node():
    """One test (one netlist build, three short runs), so that parallel workers never build
    it twice."""
    block = get_block("kvcache")
    config, work = parse_params(block, {**KV, "count": 300})
    at45 = measure(block, config, work, node="45nm", components=("banks",))
    # Each line written (appended or copied) writes every bank once: the memories' write
    # counts, read off the netlist's branch coverage, against the block's own counters.
    metrics = json.loads(next(Path(at45["run_dir"], "metrics").glob("*.json")).read_text())
    lines = metrics["counter_writes"] + metrics["counter_copies"]
    banks = [m for m in at45["sram_accesses"] if m["name"].startswith("banks.")]
    assert len(banks) == 2 and all(m["writes"] == lines for m in banks)
    assert all(m["reads"] >= metrics["counter_reads"] for m in banks)
    # Every net bit of the netlist found in the coverage by its declaration line and index.
    assert at45["bits_covered"] >= 0.98 * at45["bits"]
    e = at45["energy_pj"]
    assert min(e.values()) > 0
    assert e["total"] == pytest.approx(e["switching"] + e["clock"] + e["sram"])
    assert at45["energy_pj_per_op"] == pytest.approx(e["total"] / at45["ops"])
    assert at45["ops"] == metrics["counter_reads"] + lines
    # The command, the same run (same seed) at n5: every part scaled by the node's factor.
    n5 = _cli_energy({**KV, "count": 300}, "n5")
    assert n5["op"] == "line" and n5["ops"] == at45["ops"]
    assert {"switching", "clock", "sram", "total"} == set(n5["energy_pj"])
    assert n5["energy_pj_per_op"] == pytest.approx(
        at45["energy_pj_per_op"] * NODES["n5"].energy_vs_45nm)
    # Twice the requests: about twice the energy, about the same energy per line.
    longer = measure(block, config, parse_params(block, {**KV, "count": 600})[1],
                     node="45nm", components=("banks",))
    assert 1.5 < longer["energy_pj"]["total"] / e["total"] < 2.5
    assert longer["energy_pj_per_op"] == pytest.approx(at45["energy_pj_per_op"], rel=0.3)


def test_a_gate_netlist_build_is_verilators():
    from scoville.sim.flow import FlowError, build

    block = get_block("fp4_mul")
    with pytest.raises(FlowError, match="Verilator's"):
        build(block, parse_params(block, {})[0], "icarus", netlist=True)
