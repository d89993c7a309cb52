"""BlockBench's failures without a simulator: a run that did not end is explained by its
earliest evidence before it is called a timeout."""

from types import SimpleNamespace

import pytest

from scoville.sim.cycles.stream import ALWAYS, Timing
from scoville.testbenches.bench import BlockBench, SinkAgent
from scoville.testbenches.failures import Failure, Kind, kind_of


def _bench():
    tb = BlockBench.__new__(BlockBench)  # the parts _why_it_hung reads, no DUT
    tb.what = "block toy"
    sink = SinkAgent("o", ALWAYS, None)
    sink.expect([10, 20, 30, 40], label="outputs")
    tb.sink = {"o": sink}
    tb.model = Timing({"o": [5, 6, 7, 8]}, {})
    return tb


HUNG = Failure(Kind.TIMEOUT, "timeout after 40 cycles: o 2/4")


def _explain(payloads, handshakes):
    _bench()._why_it_hung(SimpleNamespace(payloads={"o": payloads},
                                          handshakes={"o": handshakes}), HUNG)


def test_a_wrong_value_before_the_hang_is_the_failure():
    with pytest.raises(Failure) as got:
        _explain([10, 99], [5, 6])
    assert got.value.kind is Kind.DATA
    assert "outputs: 1 mismatches; first at index 1: expected 20, got 99" in str(got.value)
    assert "the run did not end: timeout after 40 cycles" in str(got.value)


def test_a_handshake_the_model_made_and_the_rtl_never_did_is_a_timing_failure():
    with pytest.raises(Failure) as got:
        _explain([10, 20], [5, 6])
    assert kind_of(str(got.value)) is Kind.TIMING
    assert "stream o beat 2: predicted cycle 7, observed none" in str(got.value)


def test_when_the_run_so_far_agrees_it_stays_a_timeout():
    tb = _bench()
    tb.model = Timing({"o": [5, 6]}, {})  # a model that itself expects no more by now
    tb._why_it_hung(SimpleNamespace(payloads={"o": [10, 20]}, handshakes={"o": [5, 6]}), HUNG)
