"""Workload parameters: what the testbench drives, as opposed to what the hardware is."""

from dataclasses import dataclass

from scoville.rtl.lib.formats import MX_BLOCK
from scoville.rtl.lib.params import ParamError, check_int, check_prob, param

__all__ = ["AttentionWorkload", "DecoderWorkload", "FetchWorkload", "GemmQuantWorkload",
           "GemmWorkload", "KvCacheWorkload", "LinearWorkload", "MoeWorkload", "StreamWorkload"]


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


@dataclass(frozen=True)
class GemmWorkload:
    """GEMMs driven through the GEMM engine.

    Attributes
    ----------
    m, k, n : int
        The shape of every GEMM; 0 (the default) draws a random shape for each one, from
        1 to a few array tiles in each dimension.
    count : int
        GEMMs run back to back.
    gap : float
        Probability that a producer (command, A, B) leaves a cycle idle before offering a beat.
    backpressure : float
        Probability that the consumer of C holds ``ready`` low in a cycle.
    long_k : int
        ``int8``: K of the test whose sums reach 2**29 (0 skips it).
    """

    m: int = param(0, "0..65535 (0: random)", "rows of A and C")
    k: int = param(0, "0..65535 (0: random)", "columns of A, rows of B")
    n: int = param(0, "0..65535 (0: random)", "columns of B and C")
    count: int = param(4, "1..10000", "GEMMs")
    gap: float = param(0.0, "0..0.95", "probability of an idle input cycle")
    backpressure: float = param(0.0, "0..0.95", "probability of ready low")
    long_k: int = param(32773, "0..65535 (0: skip)", "int8: K of the long-accumulation test")

    def __post_init__(self):
        for name in ("m", "k", "n", "long_k"):
            check_int(name, getattr(self, name), 0, 65535)
        check_int("count", self.count, 1, 10_000)
        check_prob("gap", self.gap)
        check_prob("backpressure", self.backpressure)


@dataclass(frozen=True)
class GemmQuantWorkload:
    """GEMMs driven through the GEMM-then-quantize block.

    Attributes
    ----------
    m, k, n : int
        The shape of every GEMM; 0 (the default) draws a random shape for each one. N is a
        multiple of 32 (the block rejects any other N; its edge test drives some).
    count : int
        GEMMs run back to back.
    gap : float
        Probability that a producer (command, A, B) leaves a cycle idle before offering a beat.
    backpressure : float
        Probability that the consumer of the MX blocks holds ``ready`` low in a cycle.
    """

    m: int = param(0, "0..65535 (0: random)", "rows of A and C")
    k: int = param(0, "0..65535 (0: random)", "columns of A, rows of B")
    n: int = param(0, "multiples of 32 in 32..65504 (0: random)", "columns of B and C")
    count: int = param(4, "1..10000", "GEMMs")
    gap: float = param(0.3, "0..0.95", "probability of an idle input cycle")
    backpressure: float = param(0.3, "0..0.95", "probability of ready low")

    def __post_init__(self):
        for name in ("m", "k"):
            check_int(name, getattr(self, name), 0, 65535)
        check_int("n", self.n, 0, 65535)
        if self.n % MX_BLOCK:
            raise ParamError(f"parameter 'n' = {self.n} is not a multiple of {MX_BLOCK}; "
                             f"allowed: multiples of {MX_BLOCK} in 32..65504, or 0 (random)")
        check_int("count", self.count, 1, 10_000)
        check_prob("gap", self.gap)
        check_prob("backpressure", self.backpressure)


@dataclass(frozen=True)
class KvCacheWorkload:
    """Random requests driven through the KV-cache scratchpad.

    Attributes
    ----------
    count : int
        Random requests (allocate, append, read, fork, free, and bad ones), after which every
        sequence still alive is freed.
    max_read : int
        Longest read drawn, in tokens (0: up to the whole sequence).
    gap : float
        Probability that a producer (requests, append lines) leaves a cycle idle before offering.
    backpressure : float
        Probability that a consumer (read lines, answers) holds ``ready`` low in a cycle.
    """

    count: int = param(10_000, "1..1000000", "random requests")
    max_read: int = param(0, "0..65535 (0: whole sequence)", "longest read, tokens")
    gap: float = param(0.2, "0..0.95", "probability of an idle input cycle")
    backpressure: float = param(0.2, "0..0.95", "probability of ready low")

    def __post_init__(self):
        check_int("count", self.count, 1, 1_000_000)
        check_int("max_read", self.max_read, 0, 65535)
        check_prob("gap", self.gap)
        check_prob("backpressure", self.backpressure)


@dataclass(frozen=True)
class FetchWorkload:
    """Random commands driven through the fetch engine, served by the harness's memory agent.

    Attributes
    ----------
    count : int
        Random commands (one in twenty bad).
    max_len : int
        Longest command drawn, in words (0: the longest the engine takes).
    mem_latency : int
        Cycles from a read request's handshake to its first word.
    mem_bytes_per_cycle : int
        The memory's bandwidth.
    gap : float
        Probability that a producer (commands, the memory's words) leaves a cycle idle.
    backpressure : float
        Probability that a consumer (the memory's request port, the words out) holds ``ready``
        low in a cycle.
    """

    count: int = param(500, "1..1000000", "random commands")
    max_len: int = param(0, "0..65535 (0: the longest)", "longest command, words")
    mem_latency: int = param(20, "1..100000", "memory latency, cycles")
    mem_bytes_per_cycle: int = param(8, "1..65536", "memory bandwidth, bytes per cycle")
    gap: float = param(0.2, "0..0.95", "probability of an idle input cycle")
    backpressure: float = param(0.2, "0..0.95", "probability of ready low")

    def __post_init__(self):
        check_int("count", self.count, 1, 1_000_000)
        check_int("max_len", self.max_len, 0, 65535)
        check_int("mem_latency", self.mem_latency, 1, 100_000)
        check_int("mem_bytes_per_cycle", self.mem_bytes_per_cycle, 1, 65536)
        check_prob("gap", self.gap)
        check_prob("backpressure", self.backpressure)


@dataclass(frozen=True)
class AttentionWorkload:
    """Steps (decode, or prefill of ``tokens`` new tokens) driven through the attention block.

    Attributes
    ----------
    seqs : int
        Sequences, each allocated, given ``context`` tokens, then ``steps`` decode steps (the
        sequences' steps interleaved).
    context : int
        Tokens appended to each sequence before its steps (the set-up phase).
    steps : int
        Steps per sequence (the measured phase).
    tokens : int
        New tokens a step of a prefill block takes (T; decode steps take one).
    gap : float
        Probability that a producer (commands, Q, K, V) leaves a cycle idle before offering.
    backpressure : float
        Probability that a consumer (O, answers) holds ``ready`` low in a cycle.
    """

    seqs: int = param(2, "1..64", "sequences")
    context: int = param(40, "0..65535", "tokens cached before the steps")
    steps: int = param(2, "1..10000", "steps per sequence")
    tokens: int = param(4, "1..256", "prefill: new tokens a step")
    gap: float = param(0.2, "0..0.95", "probability of an idle input cycle")
    backpressure: float = param(0.2, "0..0.95", "probability of ready low")

    def __post_init__(self):
        check_int("seqs", self.seqs, 1, 64)
        check_int("context", self.context, 0, 65535)
        check_int("steps", self.steps, 1, 10_000)
        check_int("tokens", self.tokens, 1, 256)
        check_prob("gap", self.gap)
        check_prob("backpressure", self.backpressure)


@dataclass(frozen=True)
class MoeWorkload:
    """Batches driven through the MoE block, its experts' weights served by the harness's
    memory agent.

    Attributes
    ----------
    batches : int
        Random batches (1 .. the config's ``tokens`` tokens each; the first is full).
    mem_latency : int
        Cycles from a read request's handshake to its first word.
    mem_bytes_per_cycle : int
        The memory's bandwidth.
    gap : float
        Probability that a producer (``cmd``, ``x``, the memory's words) leaves a cycle idle.
    backpressure : float
        Probability that a consumer (the request port, ``o``) holds ``ready`` low in a cycle.
    skew : float
        How unevenly the router's choices fall: 0 as the random router draws them, 1 most
        tokens to the first few experts (:func:`scoville.sim.golden.moe.skewed`).
    """

    batches: int = param(2, "1..1000", "random batches")
    mem_latency: int = param(20, "1..100000", "memory latency, cycles")
    mem_bytes_per_cycle: int = param(8, "1..65536", "memory bandwidth, bytes per cycle")
    gap: float = param(0.2, "0..0.95", "probability of an idle input cycle")
    backpressure: float = param(0.2, "0..0.95", "probability of ready low")
    skew: float = param(0.0, "0..1", "how unevenly the router's choices fall")

    def __post_init__(self):
        check_int("batches", self.batches, 1, 1000)
        check_int("mem_latency", self.mem_latency, 1, 100_000)
        check_int("mem_bytes_per_cycle", self.mem_bytes_per_cycle, 1, 65536)
        check_prob("gap", self.gap)
        check_prob("backpressure", self.backpressure)
        check_prob("skew", self.skew, 1.0)


@dataclass(frozen=True)
class LinearWorkload:
    """Commands driven through the ``linear`` block, its weights served by the harness's
    memory agent.

    Attributes
    ----------
    commands : int
        Random commands (1 .. the config's ``tokens`` tokens, K and N at random within the
        config's bounds, with or without a bias; the first has the most tokens).
    mem_latency : int
        Cycles from a read request's handshake to its first word.
    mem_bytes_per_cycle : int
        The memory's bandwidth.
    gap : float
        Probability that a producer (``cmd``, ``x``, the memory's words) leaves a cycle idle.
    backpressure : float
        Probability that a consumer (the request port, ``o``) holds ``ready`` low in a cycle.
    """

    commands: int = param(4, "1..1000", "random commands")
    mem_latency: int = param(20, "1..100000", "memory latency, cycles")
    mem_bytes_per_cycle: int = param(8, "1..65536", "memory bandwidth, bytes per cycle")
    gap: float = param(0.2, "0..0.95", "probability of an idle input cycle")
    backpressure: float = param(0.2, "0..0.95", "probability of ready low")

    def __post_init__(self):
        check_int("commands", self.commands, 1, 1000)
        check_int("mem_latency", self.mem_latency, 1, 100_000)
        check_int("mem_bytes_per_cycle", self.mem_bytes_per_cycle, 1, 65536)
        check_prob("gap", self.gap)
        check_prob("backpressure", self.backpressure)


@dataclass(frozen=True)
class DecoderWorkload:
    """A program driven through the ``decoder`` block: a layer's shape (``IN``, ``NORM``,
    projections up and down, the residual ``ADD``, ``OUT``) on ``tokens`` tokens, then
    ``commands`` random commands (each op, in place or not, now and then one the block
    refuses), its weights served by the harness's memory agent.

    Attributes
    ----------
    tokens : int
        Tokens of the layer-shaped part (at most the projections' ``linear.tokens``).
    commands : int
        Random commands after it.
    mem_latency, mem_bytes_per_cycle : int
        The memory's latency (cycles) and bandwidth.
    gap, backpressure : float
        Probability that a producer (``cmd``, ``x``, the memory's words) leaves a cycle idle,
        that a consumer (``o``, ``resp``, the request port) holds ``ready`` low.
    """

    tokens: int = param(2, "1..256", "tokens of the layer-shaped part")
    commands: int = param(12, "0..1000", "random commands after it")
    mem_latency: int = param(20, "1..100000", "memory latency, cycles")
    mem_bytes_per_cycle: int = param(8, "1..65536", "memory bandwidth, bytes per cycle")
    gap: float = param(0.2, "0..0.95", "probability of an idle input cycle")
    backpressure: float = param(0.2, "0..0.95", "probability of ready low")

    def __post_init__(self):
        check_int("tokens", self.tokens, 1, 256)
        check_int("commands", self.commands, 0, 1000)
        check_int("mem_latency", self.mem_latency, 1, 100_000)
        check_int("mem_bytes_per_cycle", self.mem_bytes_per_cycle, 1, 65536)
        check_prob("gap", self.gap)
        check_prob("backpressure", self.backpressure)
