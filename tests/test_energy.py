"""Energy from switching activity (``scoville synth --energy``): the coverage reader, the
memories' access counts, the SRAM and node factors, and one measured block."""

import dataclasses
import io
import json
import shutil
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from scoville.blocks import get_block, parse_params
from scoville.cli import main
from scoville.synth.energy import EnergyError, coverage, energy_from, measure, memory_accesses
from scoville.synth.yosys import NODES, SRAM_45NM, sram_pj_per_bit, stillmaker


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
    # Their table 5 worked by hand at one voltage (0.8 V): HP 16 nm 0.216 and HP 7 nm 0.117
    # of HP 45 nm; and HP 7 nm at 0.7 V against HP 45 nm at 0.9 V, 0.068.
    assert stillmaker("16", 0.8) / stillmaker("45", 0.8) == pytest.approx(0.216, abs=1e-3)
    assert stillmaker("7", 0.8) / stillmaker("45", 0.8) == pytest.approx(0.117, abs=1e-3)
    assert NODES["n7"].energy_vs_45nm == pytest.approx(0.0684, abs=5e-4)
    assert NODES["n5"].energy_vs_45nm == pytest.approx(0.7 * NODES["n7"].energy_vs_45nm)
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
        _point("v_line/top_dut", 12, "block", "top.dut", 50),
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
    if (\\buf.wen2 )
      \\buf.mem [\\buf.waddr2 [5:0] ] <= \\buf.wdata2 ;
  end
  reg [31:0] _0_;
  always @(posedge clk) begin
    if (rst) _0_ <= 32'd0;
    else if (\\buf.ren ) begin
      _0_ <= \\buf.mem [\\buf.raddr ];
      if (\\buf.bypass )
        _0_[7:0] <= \\buf.wdata [7:0];
    end
  end
  reg [7:0] tab [3:0];
  assign t = tab[sel];
endmodule
"""


def _at(text: str) -> dict[str, int]:
    """Each line's 1-based number (coverage's), by its text."""
    return {line.strip(): i for i, line in enumerate(text.splitlines(), 1)}


def test_memory_accesses_are_their_enables_branch_counts():
    at = _at(NETLIST)
    branches = {at["if (\\buf.wen [0])"]: {"if": 30}, at["if (\\buf.wen [16])"]: {"if": 12},
                at["if (\\buf.wen2 )"]: {"if": 5}, at["if (rst) _0_ <= 32'd0;"]: {"if": 1},
                at["else if (\\buf.ren ) begin"]: {"if": 25},
                at["if (\\buf.bypass )"]: {"if": 3}}
    mems = {m["name"]: m for m in memory_accesses(NETLIST, branches, cycles=100)}
    # One port's two enable slices count once (the most of them); a second port (another
    # address) adds its own; the read counts its own guard, the nearest 'if' above it.
    assert mems["buf.mem"] == {"name": "buf.mem", "width": 32, "words": 64, "reads": 25,
                               "writes": 30 + 5}
    # An asynchronous read port reads every cycle; the initializer is not a write.
    assert mems["tab"] == {"name": "tab", "width": 8, "words": 4, "reads": 100, "writes": 0}
    # A guard without a branch count is an error, not a silent zero.
    del branches[at["if (\\buf.wen2 )"]]
    with pytest.raises(EnergyError, match="no branch coverage"):
        memory_accesses(NETLIST, branches, cycles=100)


GATES = """module g(a, b, clk);
  input a;
  input b;
  input clk;
  wire [4:3] x;
  reg q;
  reg [7:0] mem [3:0];
  assign t = mem[a];
endmodule
"""


def test_energy_is_toggles_times_load_plus_clocks_plus_sram():
    """A hand-built netlist: x[3] an AND (6 transistors: 1.5 pins of its own) feeding 2 pins,
    x[4] an XOR (3 pins) feeding 1, q a flip-flop (6 pins) feeding 1, the clock feeding one
    flip-flop, and a 4 x 8 memory read asynchronously (every cycle); at 45 nm a pin is 2 fF at
    0.9 V."""
    at = _at(GATES)
    net = {"verilog": GATES, "nets": {"a": [2], "b": [3], "clk": [4], "x": [5, 6], "q": [7]},
           "bits": {"2": [1, "", ""], "3": [1, "", ""], "4": [1, "", ""],
                    "5": [2, "$_AND_", ""], "6": [1, "$_XOR_", "flow"],
                    "7": [1, "$_DFF_P_", "flow"]},
           "clocks": [4], "ffs": {"$_DFF_P_": 1}}
    toggles = {at["input a;"]: {-1: 10}, at["wire [4:3] x;"]: {3: 4, 4: 8},
               at["input clk;"]: {-1: 200}, at["reg q;"]: {-1: 6}}
    e = energy_from(net, toggles, {}, cycles=100, node="45nm")
    half_cv2 = 0.5 * 2.0 * 0.9 ** 2 * 1e-3  # pJ a pin
    want = {"top": (10 * 1 + 4 * (2 + 1.5)) * half_cv2,
            "flow": (8 * (1 + 3) + 6 * (1 + 6)) * half_cv2}
    assert e["switching"] == pytest.approx(sum(want.values()))  # the clock net left out
    assert e["components"] == pytest.approx({**want, "top": want["top"] + e["sram"]})
    assert e["clock"] == pytest.approx(100 * 3 * 2 * half_cv2)
    assert e["sram"] == pytest.approx(100 * 8 * sram_pj_per_bit(4))
    assert e["sram_accesses"][0]["reads"] == 100 and e["toggles"] == 10 + 4 + 8 + 200 + 6
    assert e["bits_covered"] == 5 and e["bits"] == 6  # b never named
    n5 = energy_from(net, toggles, {}, cycles=100, node="n5")
    assert n5["total"] == pytest.approx(e["total"] * NODES["n5"].energy_vs_45nm)


def test_energy_needs_a_block_with_an_operation(capsys):
    assert main(["synth", "fp4_mul", "--energy"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no operation" in err and "gemm" in err and "\n" not in err


def test_a_block_that_does_not_elaborate_is_one_line(capsys, monkeypatch):
    import scoville.synth_command as cmd

    block = get_block("fp4_mul")

    def broken(config):
        raise ValueError("lanes must fit\nsecond line")

    monkeypatch.setattr(cmd, "get_block", lambda name: dataclasses.replace(
        block, component=broken))
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
    at45 = measure(block, config, work, node="45nm")
    # Each line written (appended or copied) writes every bank once: the memories' write
    # counts, read off the netlist's branch coverage, against the block's own counters.
    metrics = json.loads(next(Path(at45["run_dir"], "metrics").glob("*.json")).read_text())
    lines = metrics["counter_writes"] + metrics["counter_copies"]
    banks = [m for m in at45["sram_accesses"] if m["name"].startswith("banks.")]
    assert len(banks) == 2 and all(m["writes"] == lines for m in banks)
    # Reads: each line read and each line copied, and one line ahead at the end of each copy
    # (the banks are not read while the read engine has nothing to issue).
    assert metrics["copies"] and all(
        m["reads"] == metrics["counter_reads"] + metrics["counter_copies"] + metrics["copies"]
        for m in banks)
    # Every net bit of the netlist found in the coverage by its declaration line and index.
    assert at45["bits_covered"] == at45["bits"]
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
                     node="45nm")
    assert 1.5 < longer["energy_pj"]["total"] / e["total"] < 2.5
    assert longer["energy_pj_per_op"] == pytest.approx(at45["energy_pj_per_op"], rel=0.3)


def test_a_gate_netlist_build_is_verilators():
    from scoville.sim.flow import FlowError, build

    block = get_block("fp4_mul")
    with pytest.raises(FlowError, match="Verilator's"):
        build(block, parse_params(block, {})[0], "icarus", netlist=True)
