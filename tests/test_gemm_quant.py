"""GEMM then MX quantization (the first composed block): nested configuration errors, the
golden model against a plain loop, the timed model against its parts' (hand-worked and by
construction), and the RTL on both simulators."""

import numpy as np
import pytest

from scoville.blocks import get_block, parse_params
from scoville.rtl.gemm import GemmConfig
from scoville.rtl.gemm_quant import GemmQuantConfig
from scoville.rtl.lib.formats import MX_BLOCK
from scoville.rtl.lib.params import ParamError
from scoville.rtl.mx_quant import MxQuantConfig
from scoville.sim import flow
from scoville.sim.cycles import gemm as gemm_timed
from scoville.sim.cycles import gemm_quant as timed
from scoville.sim.cycles.stream import Schedule, Source
from scoville.sim.golden.gemm import Operands, gemm
from scoville.sim.golden.gemm_quant import block_order, gemm_quant
from scoville.sim.golden.mx import quantize_mxfp4

from .simcheck import assert_passed, simulate

BLOCK = get_block("gemm_quant")


def _config(rows=4, cols=4, groups=2, latency=2, **array):
    return GemmQuantConfig(array=GemmConfig(fmt="mxfp4", rows=rows, cols=cols, **array),
                           quant=MxQuantConfig(latency=latency), groups=groups)


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"array.rows": 99}, "parameter 'array.rows' = 99 is out of range; allowed: 1..64"),
        ({"array.fmt": "int8"}, "parameter 'array.fmt' = 'int8' is not allowed; allowed: mxfp4, "
                                "mxfp8"),
        ({"array.b_fmt": "mxfp8"}, "parameter 'array.b_fmt' = 'mxfp8' is not allowed; "
                                   "allowed: same, mxfp4"),
        ({"quant.out_fmt": "int4"}, "parameter 'quant.out_fmt' = 'int4' is not allowed"),
        ({"array.dataflow": "ws"}, "parameter 'array.dataflow' = 'ws' is not allowed; "
                                   "allowed: os"),
        ({"array.cols": 12}, "parameter 'array.cols' = 12 is not allowed; "
                             "allowed: 1, 2, 4, 8, 16, 32"),
        # What the composition allows is checked before the part's own rules.
        ({"array.dataflow": "ws", "array.rows": 3}, "parameter 'array.dataflow' = 'ws' is not "
                                                     "allowed; allowed: os"),
        ({"array": 5}, "parameter 'array' is a part: set its parameters as 'array.NAME'; "
                       "allowed: array.rows, array.cols"),
        ({"quant.in_fmt": "bf16"}, "parameter 'quant.in_fmt' = 'bf16' is not allowed; "
                                   "allowed: fp32"),
        ({"quant.latency": 9}, "parameter 'quant.latency' = 9 is out of range; allowed: 2..5"),
        ({"quant.latency": "x"}, "parameter 'quant.latency' must be an int; allowed: 2..5"),
        ({"groups": 0}, "parameter 'groups' = 0 is out of range; allowed: 1..8"),
        ({"array.bogus": 1}, "unknown parameter 'array.bogus'; allowed: array.rows, "
                             "array.cols"),
        ({"rows": 4}, "unknown parameter 'rows' for block 'gemm_quant'; allowed: array.rows"),
        ({"n": 33}, "parameter 'n' = 33 is not a multiple of 32"),
    ],
)
def test_bad_parameter_is_one_line_naming_its_full_path(params, text):
    with pytest.raises(ParamError) as err:
        parse_params(BLOCK, params)
    assert text in str(err.value)
    assert "\n" not in str(err.value)


def test_a_parts_own_error_names_its_parameters_by_their_full_path():
    err = ParamError("parameter 'rows' = 3 is not allowed with fmt=mxfp4 and dataflow=ws; "
                     "allowed: 1, 2").within("array", ("rows", "fmt", "dataflow"))
    assert str(err) == ("parameter 'array.rows' = 3 is not allowed with array.fmt=mxfp4 and "
                        "array.dataflow=ws; allowed: 1, 2")


def test_a_config_built_directly_is_checked_against_the_composition_too():
    with pytest.raises(ParamError, match="'array.dataflow' = 'ws' is not allowed; allowed: os"):
        GemmQuantConfig(array=GemmConfig(fmt="mxfp4", dataflow="ws", rows=4))


def test_a_part_keeps_the_composed_defaults_and_takes_dotted_and_nested_values():
    config, _ = parse_params(BLOCK, ["array.rows=2", "quant.latency=3", "groups=1"])
    assert config == _config(rows=2, cols=8, groups=1, latency=3)
    # The array's default format in this block is mxfp4, not gemm's own int8.
    assert config.array.fmt == "mxfp4"
    # A report's params (dotted) and nested dicts give the same config back.
    again, _ = parse_params(BLOCK, {"array": {"rows": 2}, "quant.latency": 3, "groups": 1})
    assert again == config
    # A part may also come as a config of its own.
    whole, _ = parse_params(BLOCK, {"array": config.array, "quant": config.quant, "groups": 1})
    assert whole == config


def _ops(rng, m, k, n, extreme=False):
    q = -(-k // MX_BLOCK)
    lo, hi = (0, 256) if extreme else (110, 145)
    return Operands(rng.integers(0, 16, (m, k)), rng.integers(0, 16, (k, n)),
                    rng.integers(lo, hi, (m, q)), rng.integers(lo, hi, (q, n)))


@pytest.mark.parametrize("extreme", [False, True])
def test_golden_is_each_row_of_c_quantized_32_columns_at_a_time_in_tile_order(extreme):
    rng = np.random.default_rng(3)
    cfg = _config(rows=3, cols=4)
    m, k, n = 7, 45, 96
    ops = _ops(rng, m, k, n, extreme)
    codes, scales = gemm_quant(cfg, ops)
    c = gemm(cfg.array, ops).view(np.float32)
    # The order, written out as loops: row tiles of 3 rows, then blocks of 32 columns, then
    # the tile's rows.
    order = [(i, j) for i0 in range(0, m, 3) for j in range(0, n, MX_BLOCK)
             for i in range(i0, min(i0 + 3, m))]
    assert [tuple(map(int, p)) for p in zip(*block_order(cfg, m, n), strict=True)] == order
    for b, (i, j) in enumerate(order):
        want_codes, want_scale = quantize_mxfp4(c[i, j:j + MX_BLOCK])
        assert codes[b].tolist() == want_codes.tolist()
        assert scales[b] == want_scale[0]
    if extreme:
        assert (scales == 0xFF).any()  # NaN blocks (a NaN scale or an overflow) reach the end


def _sources(seed, gap):
    return {name: Source(Schedule([seed, k], gap)) for k, name in enumerate(("cmd", "a", "b"))}


@pytest.mark.parametrize(("rows", "cols", "groups", "latency"),
                         [(4, 4, 2, 2), (3, 8, 1, 2), (2, 32, 2, 5), (1, 2, 3, 3), (1, 1, 2, 2)])
def test_with_streams_that_keep_up_a_block_leaves_3_plus_latency_cycles_after_its_last_row(
        rows, cols, groups, latency):
    """The composition by hand: the array runs as it does alone (the buffer never holds it
    back), and each line's block is offered 3 cycles after the row that completes it (the
    complete-line FIFO, the read port, the output register) plus the quantizer's latency."""
    cfg = _config(rows, cols, groups, latency)
    shapes = [(5, 40, 64), (2, 3, 32), (rows + 1, 1, 96)]
    alone = gemm_timed.timing(cfg.array, shapes, _sources(1, 0.0))
    parts = MX_BLOCK // cols
    last_rows = []
    pos = 0
    for m, _, n in shapes:
        rows_of = [alone.handshakes["o"][pos + k] for k in range(m * n // cols)]
        pos += len(rows_of)
        # os order: per row tile, per column tile, the tile's rows.
        k = 0
        for i0 in range(0, m, rows):
            h = min(rows, m - i0)
            for _ in range(n // MX_BLOCK):
                group = rows_of[k:k + parts * h]
                last_rows += group[(parts - 1) * h:]
                k += parts * h
    model = timed.timing(cfg, shapes, _sources(1, 0.0))
    assert model.handshakes["o"] == [c + 3 + latency for c in last_rows]
    for name in ("cmd", "a", "b"):
        assert model.handshakes[name] == alone.handshakes[name]
    assert model.counters["array.stall_out"] == 0


def test_one_group_holds_back_only_an_array_whose_tiles_come_every_cycle():
    shapes = [(2, 1, 64)]
    one = timed.timing(_config(1, 1, groups=1), shapes, _sources(1, 0.0))
    two = timed.timing(_config(1, 1, groups=2), shapes, _sources(1, 0.0))
    assert one.counters["array.stall_out"] > 0 and two.counters["array.stall_out"] == 0
    assert one.cycles > two.cycles
    wider = timed.timing(_config(1, 2, groups=1), shapes, _sources(1, 0.0))
    assert wider.counters["array.stall_out"] == 0


@pytest.mark.parametrize(("groups", "latency"), [(1, 2), (2, 2), (1, 5), (3, 4)])
def test_a_blocked_consumer_fills_the_quantizer_the_output_register_the_read_port_and_the_buffer(
        groups, latency):
    """With ``o`` never ready, the array hands over exactly as many rows as the path holds:
    ``latency`` in the quantizer (a tile's 8 rows come back to back, so its stages fill; a
    stalling pipeline keeps its bubbles), one in the buffer's output register, one in its read
    port and ``groups * rows`` lines in its memory (one row fills a line at 32 columns); then
    it stalls on ``o``."""
    rows = 8
    cfg = _config(rows=rows, cols=32, groups=groups, latency=latency)
    never = Schedule.pattern("0" * 5000)
    held = latency + 2 + groups * rows
    shapes = [(held + 3, 4, 32)]
    model, inner = timed.inner_timing(cfg, shapes, _sources(2, 0.0), never)
    assert model.handshakes["o"][0] == 5000
    assert sum(c < 5000 for c in inner["array.o"]) == held
    assert sum(c < 5000 for c in inner["reblock.o"]) == latency
    # Every cycle the array then waits on o counts as stall_out.
    assert model.counters["array.stall_out"] > 4000


@pytest.mark.parametrize("gap", [0.0, 0.5])
def test_rejected_commands_take_one_cycle_and_leave_the_array_idle(gap):
    cfg = _config()
    shapes = [(0, 1, 32), (1, 1, 33), (4, 4, 32), (2, 2, 16)]
    model = timed.timing(cfg, shapes, _sources(4, gap))
    assert model.counters["rejected"] == 3
    assert model.counters["array.rejected"] == 0
    assert len(model.handshakes["o"]) == 4
    assert model.counters["array.busy"] >= 1 + len(gemm_timed.command_steps(cfg.array, 4, 4, 32))


def test_a_slower_quantizer_changes_the_prediction_under_back_pressure():
    shapes = [(9, 33, 64), (3, 70, 32)]
    ready = Schedule([5, 3], 0.6)
    runs = [timed.timing(_config(groups=1, latency=lat), shapes, _sources(5, 0.3), ready)
            for lat in (2, 5)]
    assert runs[0].handshakes["o"] != runs[1].handshakes["o"]


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize(
    "params",
    [
        {"array.rows": 2, "array.cols": 4, "count": 6},
        # One group, a slow quantizer and heavy back-pressure: the buffer fills and holds the
        # array back; a part's parameter changes the composite's timing and the RTL follows.
        {"array.rows": 3, "array.cols": 8, "groups": 1, "quant.latency": 4,
         "array.buffer_depth": 2, "backpressure": 0.8, "gap": 0.5, "count": 3},
        # A row of C's tile is a whole line (no write granularity), three groups.
        {"array.rows": 1, "array.cols": 32, "groups": 3, "count": 3},
        # MoE's W4A8 path: MXFP8 activations against MXFP4 weights, quantized to MXFP8.
        {"array.rows": 2, "array.cols": 4, "array.fmt": "mxfp8", "array.b_fmt": "mxfp4",
         "quant.out_fmt": "mxfp8", "count": 3},
        # A group of 6 lines, more than the read port, the output register and the
        # quantizer's stages hold; K = 1 and heavy back-pressure: the array fills lines while
        # earlier ones wait to leave (a line freed before it is read is overwritten: the
        # mutation reblock-frees-line-at-write, which the other cases catch only as timing).
        {"array.rows": 6, "array.cols": 4, "groups": 1, "k": 1, "count": 6, "gap": 0.0,
         "backpressure": 0.9},
    ],
    ids=["2x4", "3x8-g1-lat4-heavy", "1x32-g3", "2x4-mxfp8-mxfp4-to-mxfp8", "6x4-g1-k1-heavy"],
)
def test_gemm_quant_rtl(simulator, seed, params):
    assert_passed(simulate("gemm_quant", simulator, seed, **params))


@pytest.mark.sim
def test_gemm_quant_rtl_one_group_holds_back_a_1x1_array_with_k_1(simulator, seed):
    """The one case where a single group holds the array back with streams that keep up
    (tiles every cycle, 32 parts to a line, one line): the RTL stalls the array exactly as the
    model says."""
    result = simulate("gemm_quant", simulator, seed, **{
        "array.rows": 1, "array.cols": 1, "groups": 1, "k": 1, "gap": 0.0,
        "backpressure": 0.0, "count": 2})
    assert_passed(result)
    assert result.metrics["test_workload"]["counter_array.stall_out"] > 0


@pytest.mark.sim
@pytest.mark.parametrize(("m", "n"), [(1, 65504), (65535, 32)])
def test_gemm_quant_rtl_at_the_16_bit_limits(seed, m, n):
    """The widest N (2047 blocks of a row: the buffer's block counter at its top) and the
    tallest M (the last row tile starts at 65533) on Verilator, on the build of the heavy
    configuration above."""
    block = get_block("gemm_quant")
    config, workload = parse_params(block, {
        "array.rows": 3, "array.cols": 8, "groups": 1, "quant.latency": 4,
        "array.buffer_depth": 2, "m": m, "k": 1, "n": n, "count": 1})
    result = flow.run(block, config, workload, "verilator", seed=seed, tests=["test_workload"])
    assert_passed(result)
    assert result.metrics["test_workload"]["blocks"] == m * n // MX_BLOCK
