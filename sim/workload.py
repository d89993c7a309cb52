"""Workload parameters: what the testbench drives, as opposed to what the hardware is."""

from dataclasses import dataclass

from scoville.rtl.params import check_int, check_prob, param

__all__ = ["StreamWorkload"]


@dataclass(frozen=True)
class StreamWorkload:
    """A random workload on a streaming block.

    Attributes
    ----------
    count : int
        Random items driven through the block (after its directed and exhaustive items).
    gap : float
        Probability that the producer leaves a cycle idle before offering an item.
    backpressure : float
        Probability that the consumer holds ``ready`` low in a cycle.
    """

    count: int = param(1000, "1..10000000", "random items")
    gap: float = param(0.3, "0..0.95", "probability of an idle input cycle")
    backpressure: float = param(0.3, "0..0.95", "probability of ready low")

    def __post_init__(self):
        check_int("count", self.count, 1, 10_000_000)
        check_prob("gap", self.gap)
        check_prob("backpressure", self.backpressure)
