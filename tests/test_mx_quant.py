"""MX quantizer unit: config errors and RTL on both simulators (its golden models,
:func:`scoville.sim.golden.mx.quantize_mxfp4` and ``quantize_mxfp8``, are tested in
``test_golden_quant.py``)."""

import pytest

from scoville.rtl.lib.params import ParamError
from scoville.rtl.mx_quant import MxQuantConfig

from .simcheck import assert_passed, simulate


def test_config_rejects_unknown_input_format():
    with pytest.raises(ParamError, match="'in_fmt'.*allowed: fp32, bf16"):
        MxQuantConfig(in_fmt="fp16")


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize(("in_fmt", "out_fmt", "latency", "count"),
                         [("fp32", "mxfp4", 2, 10_000), ("bf16", "mxfp4", 2, 500),
                          ("fp32", "mxfp4", 4, 500), ("fp32", "mxfp8", 2, 2_000),
                          ("bf16", "mxfp8", 3, 500), ("fp32", "mxfp8", 5, 500)])
def test_mx_quant_rtl(simulator, seed, in_fmt, out_fmt, latency, count):
    # fp32 carries the >= 10,000 random blocks of the verification plan; latencies 3..5 check
    # that every cut's registers hold under back-pressure (the timed model reads the latency).
    assert_passed(simulate("mx_quant", simulator, seed, in_fmt=in_fmt, out_fmt=out_fmt,
                           latency=latency, count=count))


def test_config_rejects_unknown_output_format():
    with pytest.raises(ParamError, match="'out_fmt' = 'nvfp4' is not allowed; allowed: mxfp4, "
                                         "mxfp8"):
        MxQuantConfig(out_fmt="nvfp4")


def test_config_rejects_a_latency_out_of_range():
    with pytest.raises(ParamError, match="'latency' = 1 is out of range; allowed: 2..5"):
        MxQuantConfig(latency=1)
