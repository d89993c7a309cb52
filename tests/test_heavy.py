"""Every streaming unit under heavy valid gaps and ready back-pressure (90% of cycles each): the
data bit for bit and every handshake where the timed model puts it. (``gemm`` and ``kvcache``
have their own heavy tests beside their other simulation tests.) The hardware parameters are
mostly those of each unit's main tests, so the builds are shared (the dot units' at their
default latencies, which their main tests leave out)."""

import pytest

from .simcheck import assert_passed, simulate

HEAVY = [
    ("fp4_mul", {}),
    ("fp32_add", {"lanes": 3, "latency": 4}),
    ("int_mac", {"fmt": "int4", "lanes": 4}),
    ("mx_dot", {"lanes": 4}),
    ("nvfp4_dot", {"lanes": 4}),
    ("mx_quant", {"in_fmt": "bf16"}),
    ("rmsnorm", {}),
    ("rope", {}),
    ("argmax", {"vocab": 32, "lanes": 4}),
]


@pytest.mark.sim
@pytest.mark.parametrize(("block", "params"), HEAVY, ids=[b for b, _ in HEAVY])
def test_heavy_gaps_and_back_pressure(simulator, seed, block, params):
    result = simulate(block, simulator, seed, count=60, gap=0.9, backpressure=0.9, **params)
    assert_passed(result)
    work = result.metrics["test_workload"]
    # Heavy indeed: most cycles of the workload pass without a handshake.
    assert work["cycles"] > 5 * work["items"]
