"""A linear layer on the array: the parameters of the ``linear`` block, one frozen config that
its golden model (:mod:`scoville.sim.golden.linear`) reads.

The block (``docs/linear.md``) computes ``y = x W^T + b`` (Hugging Face ``nn.Linear``) for T
tokens: x arrives as FP32 lines and is stored rounded to BF16; the weight W (N x K, BF16) and
its FP32 bias stream in from memory through the fetch engine, column tile after column tile
(``array.cols`` outputs each, as :meth:`LinearConfig.tile_bits` lays them out), each tile
fetched once and replayed for every row tile of T; the array (``bf16``, ``os``) sums each
output's K products in FP32 in its partial sums (:mod:`scoville.rtl.gemm_arith`), and the
tile's bias is added in FP32. It is the
decoder's projections and its LM head.
"""

from dataclasses import dataclass

from amaranth.hdl import Module, Mux
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .fetch import Fetch, FetchConfig, request_layout
from .gemm import COUNTERS as GEMM_COUNTERS
from .gemm import Gemm, GemmConfig
from .lib.codes import names
from .lib.counters import count, counter_layout
from .lib.fp32 import fp32_add
from .lib.params import ParamError, check_int, check_parts, param, part
from .linear_parts import LINE, Sequencer, Status, TileRequests, XStore, command_layout
from .moe_weights import TileFormat, WeightTiles

__all__ = ["COLS", "COUNTERS", "LINE", "OWN_COUNTERS", "STATUS", "Linear", "LinearConfig",
           "Status", "command_layout"]

#: ``array.cols``: a power of two (a command's N splits into tiles by a shift).
COLS = tuple(1 << i for i in range(7))

_ARRAY = GemmConfig(rows=8, cols=16, fmt="bf16")

#: ``{name: Status member}``, the names in lower case.
STATUS = names(Status)

#: The block's own counters, beside the array's (``array.*``): words read on the weight port,
#: column tiles run, and commands refused.
OWN_COUNTERS = ("weight_words", "tiles", "rejected")

#: The ``counters`` port.
COUNTERS = data.StructLayout({
    "array": GEMM_COUNTERS,
    **{name: f.shape for name, f in counter_layout(dict.fromkeys(OWN_COUNTERS, 32))},
})


@dataclass(frozen=True)
class LinearConfig:
    """Parameters of the ``linear`` block.

    Attributes
    ----------
    array : GemmConfig
        The array (``array.*``: ``rows``, ``cols``), BF16, output-stationary.
    tokens : int
        The most tokens (rows of x) a command takes: the x store's lanes.
    k_max : int
        The most input features K a command takes: the x store's and a weight slot's depth.
    n_max : int
        The most output features N a command takes.
    weight_port_bits : int
        Width of the port the weights arrive on.
    addr_bits : int
        Width of a weight word's address.
    fetch_buffer : int
        Weight words requested and not yet loaded.
    """

    array: GemmConfig = part(_ARRAY, "the array (block gemm), BF16",
                             restrict={"fmt": ("bf16",), "b_fmt": ("same",),
                                       "dataflow": ("os",)})
    tokens: int = param(16, "1..256", "the most tokens a command takes")
    k_max: int = param(256, "32..16384, a multiple of 32", "the most input features K")
    n_max: int = param(4096, "array.cols..1048576, a multiple of array.cols",
                       "the most output features N")
    weight_port_bits: int = param(256, "64, 128, 256, 512, 1024", "weight port width")
    addr_bits: int = param(20, "8..32", "bits of a weight word address")
    fetch_buffer: int = param(64, "32..4096", "weight words requested and not yet loaded "
                              "(cover the memory's round trip: latency x words a cycle + 16)")

    def __post_init__(self):
        check_parts(self)
        check_int("tokens", self.tokens, 1, 256)
        check_int("k_max", self.k_max, LINE, 16384)
        if self.k_max % LINE:
            raise ParamError(f"parameter 'k_max' = {self.k_max} is not allowed; allowed: a "
                             f"multiple of {LINE} from {LINE} to 16384")
        cols = self.array.cols
        if cols not in COLS:
            raise ParamError(f"parameter 'array.cols' = {cols} is not allowed; allowed: "
                             f"{', '.join(map(str, COLS))}")
        check_int("n_max", self.n_max, cols, 1 << 20)
        if self.n_max % cols:
            raise ParamError(f"parameter 'n_max' = {self.n_max} is not allowed; allowed: a "
                             f"multiple of array.cols = {cols} from {cols} to 1048576")
        check_int("weight_port_bits", self.weight_port_bits, 64, 1024,
                  choices=[64 << k for k in range(5)])
        check_int("addr_bits", self.addr_bits, 8, 32)
        check_int("fetch_buffer", self.fetch_buffer, 32, 4096)

    @property
    def tile_format(self) -> TileFormat:
        """How a weight's column tiles lie in memory (BF16 rows, then the FP32 biases)."""
        return TileFormat(array=self.array, port_bits=self.weight_port_bits, k_max=self.k_max,
                          tokens=self.tokens)

    def tile_bits(self, k: int, bias: bool) -> int:
        """Bits of one column tile (``array.cols`` outputs) of a weight of ``k`` inputs as the
        memory holds it: ``k`` rows of ``cols`` BF16 weights (row ``i`` holds input ``i`` of
        each output, column 0 lowest), then with ``bias`` the ``cols`` FP32 biases."""
        return self.tile_format.tile_bits(k, bias)

    def tile_words(self, k: int, bias: bool) -> int:
        """Words of the weight port one column tile takes (the last one zero-padded)."""
        return self.tile_format.tile_words(k, bias)

    def weight_words(self, k: int, n: int, bias: bool) -> int:
        """Words of a whole N x K weight (its ``n / cols`` tiles, one after another)."""
        return n // self.array.cols * self.tile_words(k, bias)

    @property
    def fetch(self) -> FetchConfig:
        """The weight fetch engine's parameters: a command per column tile."""
        len_bits = max(self.tile_words(self.k_max, True).bit_length(), 4)
        return FetchConfig(data_bits=self.weight_port_bits, addr_bits=self.addr_bits,
                           len_bits=len_bits, burst=min(16, (1 << len_bits) - 1),
                           buffer=self.fetch_buffer)


class Linear(wiring.Component):
    """``y = x W^T + b`` on the array, the weights fetched from memory (the module says how).
    ``config`` is a :class:`LinearConfig`.

    Parts (``elaborate`` is their wiring; ``docs/linear.md`` draws them): ``seq``
    (:class:`~scoville.rtl.linear_parts.Sequencer`), ``xs``
    (:class:`~scoville.rtl.linear_parts.XStore`), ``requests``
    (:class:`~scoville.rtl.linear_parts.TileRequests`), ``fetch``
    (:class:`~scoville.rtl.fetch.Fetch`), ``tiles``
    (:class:`~scoville.rtl.moe_weights.WeightTiles`), ``array``
    (:class:`~scoville.rtl.gemm.Gemm`), and the bias adders on the array's rows.

    Attributes
    ----------
    cmd : In(stream.Signature(command_layout(config)))
        A command: T, K, N, the weight's first word and whether it has a bias; then T x K / 32
        beats on ``x``.
    x : In(stream.Signature(ArrayLayout(32, 32)))
        The tokens' inputs, FP32, a line of 32 a beat, token after token.
    req, rdata :
        Read requests for the weight's words and the memory's words (:attr:`memory_ports`;
        the layout of :meth:`LinearConfig.tile_bits`, tile after tile from ``addr``).
    o : Out(stream.Signature(ArrayLayout(32, array.cols)))
        The outputs, FP32: column tile after column tile, each the T tokens' rows in order.
    status : Out(Status)
        Of the latest command.
    counters : Out(COUNTERS)
        Since reset: the array's (``array.*``) and :data:`OWN_COUNTERS`.
    """

    memory_ports = {"req": "rdata"}

    def __init__(self, config: LinearConfig):
        self._config = config
        fc = config.fetch
        super().__init__({
            "cmd": In(stream.Signature(command_layout(config))),
            "x": In(stream.Signature(data.ArrayLayout(32, LINE))),
            "req": Out(stream.Signature(request_layout(fc.addr_bits, fc.len_bits))),
            "rdata": In(stream.Signature(config.weight_port_bits)),
            "o": Out(stream.Signature(data.ArrayLayout(32, config.array.cols))),
            "status": Out(Status),
            "counters": Out(COUNTERS),
        })

    @property
    def config(self) -> LinearConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.seq = seq = Sequencer(cfg)
        m.submodules.xs = xs = XStore(cfg)
        m.submodules.requests = reqs = TileRequests(cfg)
        m.submodules.fetch = fetch = Fetch(cfg.fetch)
        m.submodules.tiles = tiles = WeightTiles(cfg.tile_format)
        m.submodules.array = array = Gemm(cfg.array)

        wiring.connect(m, wiring.flipped(self.cmd), seq.cmd)
        m.d.comb += [self.status.eq(seq.status),
                     xs.clear.eq(seq.start), xs.lines.eq(seq.run.lines), xs.want.eq(seq.want),
                     seq.count.eq(xs.count), reqs.start.eq(seq.start)]
        # The requests take the command in the cycle it is taken (start): its fields as run.
        c = self.cmd.payload
        m.d.comb += [reqs.run.tokens.eq(c.tokens), reqs.run.lines.eq(c.k // LINE),
                     reqs.run.tiles.eq(c.n >> (cfg.array.cols.bit_length() - 1)),
                     reqs.run.addr.eq(c.addr), reqs.run.bias.eq(c.bias)]
        wiring.connect(m, wiring.flipped(self.x), xs.i)

        # The weights: requests, the memory's words into the tiles.
        wiring.connect(m, reqs.fetch, fetch.cmd)
        wiring.connect(m, reqs.tile, tiles.tile)
        wiring.connect(m, fetch.req, wiring.flipped(self.req))
        wiring.connect(m, wiring.flipped(self.rdata), fetch.rdata)
        wiring.connect(m, fetch.o, tiles.words)

        # The array: commands from the sequencer, A from the x store, B from the tiles.
        wiring.connect(m, seq.array_cmd, array.cmd)
        wiring.connect(m, seq.feed, tiles.cmd)
        wiring.connect(m, seq.x_cmd, xs.cmd)
        wiring.connect(m, xs.a, array.a)
        wiring.connect(m, tiles.b, array.b)

        # Rows of C, plus the tile's biases (a command without them passes the rows as they
        # are: -0 stays -0).
        row, bias = array.o.payload, tiles.bias
        m.d.comb += [self.o.valid.eq(array.o.valid), array.o.ready.eq(self.o.ready),
                     seq.row.eq(array.o.valid & array.o.ready)]
        for q in range(cfg.array.cols):
            total = fp32_add(m, row[q], bias[q], name=f"bias_add{q}")
            m.d.comb += self.o.payload[q].eq(Mux(seq.run.bias, total, row[q]))

        m.d.comb += self.counters.array.eq(array.counters)
        took = self.cmd.valid & self.cmd.ready
        count(m, self.counters, {
            "weight_words": self.rdata.valid & self.rdata.ready,
            "tiles": seq.array_cmd.valid & seq.array_cmd.ready,
            "rejected": took & ~seq.start,
        })
        return m
