"""MXFP4 quantizer unit: config errors and RTL on both simulators (its golden model,
:func:`scoville.sim.golden.mx.quantize_mxfp4`, is tested in ``test_golden_quant.py``)."""

import pytest

from scoville.rtl.mxquant import MxQuantConfig
from scoville.rtl.params import ParamError

from .simcheck import assert_passed, simulate


def test_config_rejects_unknown_input_format():
    with pytest.raises(ParamError, match="'in_fmt'.*allowed: fp32, bf16"):
        MxQuantConfig(in_fmt="fp16")


@pytest.mark.sim
@pytest.mark.parametrize(("in_fmt", "count"), [("fp32", 10_000), ("bf16", 500)])
def test_mx_quant_rtl(simulator, seed, in_fmt, count):
    # fp32 carries the >= 10,000 random blocks of the verification plan.
    assert_passed(simulate("mx_quant", simulator, seed, in_fmt=in_fmt, count=count))
