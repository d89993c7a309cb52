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


def test_a_handshake_made_in_another_cycle_before_the_hang_is_a_timing_failure():
    with pytest.raises(Failure) as got:
        _explain([10, 20], [5, 7])
    assert kind_of(str(got.value)) is Kind.TIMING
    assert "stream o beat 1: predicted cycle 6, observed cycle 7" in str(got.value)


def test_a_handshake_never_made_stays_a_timeout_naming_the_beat():
    """A hang is never passed off as a late handshake: the first beat that never came is
    named, and the kind stays timeout (which no mutation may expect)."""
    with pytest.raises(Failure) as got:
        _explain([10, 20], [5, 6])
    assert kind_of(str(got.value)) is Kind.TIMEOUT
    assert "stream o beat 2: predicted cycle 7, observed none" in str(got.value)


def test_a_failure_survives_pickling():
    """A failure pickled (as a Dask worker sends it) comes back with its kind and message."""
    import pickle

    got = pickle.loads(pickle.dumps(Failure(Kind.TIMING, "resp 3: cycle 40, expected 41")))
    assert isinstance(got, Failure) and got.kind is Kind.TIMING
    assert str(got) == "[timing] resp 3: cycle 40, expected 41"
    assert kind_of(str(got)) is Kind.TIMING
