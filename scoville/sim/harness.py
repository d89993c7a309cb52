"""The free-running simulation top: a block's component inside a Verilog harness that drives and
records every stream with no Python callback per cycle.

For each stream the component *takes* (a source, from the harness's side) the harness holds a
ring of payloads and a ring of valid-schedule bits; for each stream it *gives* (a sink), a ring
of ready-schedule bits. Once ``run`` rises, a free-running cycle counter starts at 0 and the
harness offers and takes beats by the testbench's rules (:mod:`scoville.sim.cycles.stream`): a
source offers its next beat from the first cycle its valid bit is set and holds it until taken;
a sink is ready in the cycles its ready bit is set. Every stream's handshakes are recorded in a
ring of bits, one per cycle (set in the cycles with a handshake), and a sink's payloads in a
ring of payloads.

The testbench (:class:`scoville.testbenches.freerun.FreeRun`) loads and drains the rings in bulk
through files (``$fread`` of binary files in, ``$writememh`` out, each triggered by a rising
port), in zero simulated time, every :data:`WAKE` cycles, while the design runs. The rings have
a fixed depth, so the build never depends on the workload. If the testbench ever fell behind, a
ring would run dry: the harness then raises ``starved`` (it never stalls a stream in its place,
which would change the design's timing).

Protocol checks on every stream, every cycle: once ``valid`` is high without ``ready``, it must
stay high, and the payload unchanged, until the beat is taken; ``valid`` and a handed-over
payload must be 0s and 1s, and so must ``ready`` (on Icarus's four-state values). The first
violation sets ``err`` with its cycle, stream and kind. A ring file read short (missing or
truncated) sets ``ioerr``.

A component that reads from a memory names its request stream and the data stream that answers
it in ``memory_ports`` (``{"req": "rdata"}``): the harness's *memory agent* serves them. Its
memory (:data:`MEM_DEPTH` words of the data stream's width) is loaded from a file before the run
(``$fread``, as the rings are). A request ``(addr, len)`` (fields of the request payload, in
words) is taken when the request stream's ready bit is set and the agent's queue of
:data:`MEM_QUEUE` requests has room; its words ``mem[addr] .. mem[addr + len - 1]`` can be
offered from ``mem_latency`` cycles after the request's handshake, requests in order. The
agent's bandwidth is ``mem_bytes_per_cycle``: a byte budget starts at one word's bytes ``B``
(the data width in whole bytes), spends ``B`` per word taken and grows by
``mem_bytes_per_cycle`` every cycle up to ``B + mem_bytes_per_cycle - 1``, and a word is
offered only when the budget holds ``B``. Like any source, the data stream also has a valid
schedule, and an offered word is held until taken. A request of 0 words or past the memory is a
violation (kind 3). A data stream whose payload is ``data`` and a ``last`` bit above it gets
``last`` on each response's last word, except that the word counted ``fault_NAME`` (from the
run's first) has it flipped: a response that ends early or runs long.
:mod:`scoville.sim.cycles.memory` models the agent to the cycle.

Every other output of the component is sampled in cycle 0 and in the cycle after the last
expected handshake (``NAME_start``, ``NAME_end``), so a testbench reads counters over exactly
the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Shape
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import Out

__all__ = ["DEPTH", "MEM_DEPTH", "MEM_QUEUE", "PERIOD_NS", "SCHED_WORDS", "WAKE", "Port",
           "Stream", "harness_verilog", "memory_ports", "ports", "stream_names"]

#: Entries of every payload and record ring.
DEPTH = 32768
#: 32-bit words of every schedule ring (one bit per cycle).
SCHED_WORDS = 1024
#: The period of the clock the harness generates, in nanoseconds (the flow's time unit).
PERIOD_NS = 10
#: Words of a memory agent's memory.
MEM_DEPTH = 65536
#: Requests a memory agent holds (taken, not yet answered in full).
MEM_QUEUE = 16
#: Cycles between the testbench's refills: at most half of what any ring holds.
WAKE = 16384
assert 2 * WAKE <= min(DEPTH, 32 * SCHED_WORDS)


def stream_names(component: wiring.Component) -> list[str]:
    """The stream members of ``component``, in signature order."""
    return [name for name, member in component.signature.members.items()
            if member.is_signature and isinstance(member.signature, stream.Signature)]


@dataclass(frozen=True)
class Stream:
    """A stream member of the component: ``source`` when the component takes it (the harness
    drives ``valid`` and ``payload``). ``answers``: for a data stream the memory agent serves,
    its request stream; ``requests``: for a request stream, the data stream that answers it;
    ``last``: a data stream whose payload is a memory word ``data`` and a bit ``last`` above
    it, which the agent sets on each response's last word."""

    name: str
    width: int
    source: bool
    index: int
    answers: str = ""
    requests: str = ""
    last: bool = False


@dataclass(frozen=True)
class Port:
    """A plain port of the component."""

    name: str
    width: int
    output: bool


def memory_ports(component: wiring.Component) -> dict[str, str]:
    """The component's memory interfaces: each request stream (an output whose payload has
    fields ``addr`` and ``len``) and the data stream (an input) that answers it."""
    pairs = dict(getattr(component, "memory_ports", {}))
    members = component.signature.members
    for req, dat in pairs.items():
        for name, flow in ((req, Out), (dat, wiring.In)):
            member = members[name] if name in members else None
            if (member is None or not member.is_signature
                    or not isinstance(member.signature, stream.Signature) or member.flow != flow):
                raise ValueError(f"memory_ports: {name!r} is not an {flow.name.lower()}put "
                                 "stream of the component")
        layout = members[req].signature.members["payload"].shape
        if not isinstance(layout, data.StructLayout) or not {"addr", "len"} <= set(
                dict(layout.members)):
            raise ValueError(f"memory_ports: the payload of request stream {req!r} needs "
                             "fields 'addr' and 'len'")
    return pairs


def _request_fields(component: wiring.Component, req: str) -> dict[str, tuple[int, int]]:
    """Offset and width of the ``addr`` and ``len`` fields of request stream ``req``."""
    layout = component.signature.members[req].signature.members["payload"].shape
    return {key: (layout[key].offset, layout[key].width) for key in ("addr", "len")}


def ports(component: wiring.Component) -> tuple[list[Stream], list[Port]]:
    """The component's streams and plain ports, in signature order."""
    streams, plain = [], []
    pairs = memory_ports(component)
    answers = {dat: req for req, dat in pairs.items()}
    for name, member in component.signature.members.items():
        if member.is_signature and isinstance(member.signature, stream.Signature):
            shape = member.signature.members["payload"].shape
            width = max(Shape.cast(shape).width, 1)
            last = (name in answers and isinstance(shape, data.StructLayout)
                    and set(dict(shape.members)) == {"data", "last"}
                    and shape["data"].offset == 0 and shape["last"].offset == width - 1)
            streams.append(Stream(name, width, member.flow != Out, len(streams),
                                  answers.get(name, ""), pairs.get(name, ""), last))
        elif member.is_port:
            plain.append(Port(name, max(Shape.cast(member.shape).width, 1), member.flow == Out))
    return streams, plain


def _vec(width: int) -> str:
    return f"[{width - 1}:0] " if width > 1 else ""


def _fread(strobe: str, file: str, memory: str, lo: str, hi: str, nbytes: int) -> list[str]:
    """Verilog that reads entries ``lo..hi`` of ``memory`` (``nbytes`` bytes each) from the
    binary ``file`` (each entry its whole bytes, most significant first) on a rising
    ``strobe``; a short read (a missing or truncated file) sets ``ioerr``."""
    # The file handle is a variable of the testbench's file I/O, not logic: blocking is right.
    return [
        f"  integer {strobe}_fd, {strobe}_got;",
        f"  reg {strobe}_short = 1'b0;",
        "  /* verilator lint_off BLKSEQ */",
        f"  always @(posedge {strobe}) begin",
        f"    {strobe}_fd = $fopen(\"{file}\", \"rb\");",
        f"    {strobe}_got = $fread({memory}, {strobe}_fd, {lo}, {hi} - {lo} + 32'd1);",
        f"    $fclose({strobe}_fd);",
        # $fread counts bytes: each entry is its whole bytes.
        f"    if ({strobe}_got != ({hi} - {lo} + 32'd1) * {nbytes}) {strobe}_short = 1'b1;",
        "  end",
        "  /* verilator lint_on BLKSEQ */",
    ]


def _dump(strobe: str, files: list[tuple[str, str]], lo: str, hi: str) -> list[str]:
    """Verilog that writes entries ``lo..hi`` of each memory to its file (``$writememh``: one
    entry per line in hex, X and Z bits as ``x`` and ``z``) on a rising ``strobe``."""
    return [f"  always @(posedge {strobe}) begin",
            *(f"    $writememh(\"{file}\", {memory}, {lo}, {hi});" for file, memory in files),
            "  end"]


def _hit(n: str) -> list[str]:
    """The statements, in a clocked block's running branch, that record stream ``n``'s
    handshake bit of this cycle: the bit's word is cleared in its first cycle (so a word read
    before its later cycles are reached holds 0s there), and a bit set only in a cycle with a
    handshake (a cycle without one costs a compare)."""
    ls = (SCHED_WORDS - 1).bit_length()
    return [f"      if (word_begins) {n}_hit[cycle[{ls + 4}:5]] <= {{31'd0, {n}_fire}};",
            f"      else if ({n}_fire) {n}_hit[cycle[{ls + 4}:5]][cycle[4:0]] <= 1'b1;"]


def _memory_agent(s: Stream, fields: dict[str, tuple[int, int]]) -> list[str]:
    """Verilog of the memory agent that serves data stream ``s`` from requests on stream
    ``s.answers`` (``fields``: offset and width of the request's ``addr`` and ``len``)."""
    n, r = s.name, s.answers
    w = s.width - s.last            # the memory's words: the payload less its ``last`` bit
    nbytes = -(-w // 8)
    lq = (MEM_QUEUE - 1).bit_length()
    lm = (MEM_DEPTH - 1).bit_length()
    (ao, aw), (lo, lw) = fields["addr"], fields["len"]
    return [
        f"  // memory agent: {MEM_DEPTH} words of {w} bits, requests on {r}",
        f"  reg {_vec(w)}{n}_mem [0:{MEM_DEPTH - 1}];",
        *_fread(f"mload_{n}", f"mem_{n}.bin", f"{n}_mem", f"mlo_{n}", f"mhi_{n}", nbytes),
        f"  wire [31:0] {r}_addr = {r}_payload[{ao + aw - 1}:{ao}];",
        f"  wire [31:0] {r}_len = {r}_payload[{lo + lw - 1}:{lo}];",
        f"  assign {n}_bad = run & {r}_fire & (({r}_len == 32'd0)"
        f" | ({{1'b0, {r}_addr}} + {{1'b0, {r}_len}} > 33'd{MEM_DEPTH}));",
        f"  reg [31:0] {n}_qaddr [0:{MEM_QUEUE - 1}];",
        f"  reg [31:0] {n}_qlen [0:{MEM_QUEUE - 1}];",
        f"  reg [31:0] {n}_qdue [0:{MEM_QUEUE - 1}];",
        f"  reg [{lq}:0] {n}_qhead, {n}_qtail;",
        f"  reg [31:0] {n}_beat, {n}_budget;",
        f"  reg {n}_hold;",
        f"  wire [{lq}:0] {n}_qcount = {n}_qtail - {n}_qhead;",
        f"  wire [{lq - 1}:0] {n}_h = {n}_qhead[{lq - 1}:0];",
        f"  assign {n}_room = {n}_qcount != {lq + 1}'d{MEM_QUEUE};",
        # The head request's words are due ``lat`` cycles after its handshake.
        f"  wire {n}_due = ({n}_qcount != {lq + 1}'d0) & (cycle >= {n}_qdue[{n}_h]);",
        f"  wire {n}_afford = {n}_budget >= 32'd{nbytes};",
        f"  assign {n}_valid = run & (count_{n} < total_{n})"
        f" & ({n}_hold | ({n}_bit & {n}_due & {n}_afford));",
        f"  wire {n}_dry = 1'b0;",
        f"  wire [31:0] {n}_word = {n}_qaddr[{n}_h] + {n}_beat;",
        *([f"  wire {n}_rlast = ({n}_beat + 32'd1 == {n}_qlen[{n}_h])"
           f" ^ (count_{n} == fault_{n});",
           f"  assign {n}_payload = {{{n}_rlast, {n}_mem[{n}_word[{lm - 1}:0]]}};"]
          if s.last else [f"  assign {n}_payload = {n}_mem[{n}_word[{lm - 1}:0]];"]),
        f"  wire [32:0] {n}_cap = {{1'b0, bpc_{n}}} + 33'd{nbytes - 1};",
        f"  wire [32:0] {n}_grow = {{1'b0, {n}_budget}} + {{1'b0, bpc_{n}}}"
        f" - ({n}_fire ? 33'd{nbytes} : 33'd0);",
        "  always @(posedge clk) begin",
        "    if (rst | ~run) begin",
        f"      count_{n} <= 32'd0; {n}_hold <= 1'b0; {n}_qhead <= {lq + 1}'d0;",
        f"      {n}_qtail <= {lq + 1}'d0; {n}_beat <= 32'd0; {n}_budget <= 32'd{nbytes};",
        "    end else begin",
        f"      {n}_hold <= {n}_valid & ~{n}_ready;",
        *_hit(n),
        f"      {n}_budget <= ({n}_grow > {n}_cap) ? {n}_cap[31:0] : {n}_grow[31:0];",
        f"      if ({r}_fire) begin",
        f"        {n}_qaddr[{n}_qtail[{lq - 1}:0]] <= {r}_addr;",
        f"        {n}_qlen[{n}_qtail[{lq - 1}:0]] <= {r}_len;",
        f"        {n}_qdue[{n}_qtail[{lq - 1}:0]] <= cycle + lat_{n};",
        f"        {n}_qtail <= {n}_qtail + {lq + 1}'d1;",
        "      end",
        f"      if ({n}_fire) begin",
        f"        count_{n} <= count_{n} + 32'd1;",
        f"        if ({n}_beat + 32'd1 == {n}_qlen[{n}_h]) begin",
        f"          {n}_beat <= 32'd0; {n}_qhead <= {n}_qhead + {lq + 1}'d1;",
        "        end else begin",
        f"          {n}_beat <= {n}_beat + 32'd1;",
        "        end",
        "      end",
        "    end",
        "  end",
    ]


def harness_verilog(component: wiring.Component, dut: str, top: str) -> str:
    """The Verilog module ``top``: the harness around module ``dut`` (the component's own
    Verilog, with Amaranth's port names ``NAME__valid``, ``NAME__ready``, ``NAME__payload``).

    Ports, besides ``rst`` and ``clk`` (an output: the harness generates the clock, period
    :data:`PERIOD_NS`, starting low at time 0): ``run`` (cycle 0 is the first cycle it is
    high; low clears every count), ``sched_loaded`` (cycles whose schedule bits are loaded),
    ``cycle``, ``done`` (every source has handed over ``total_NAME`` beats and every sink taken
    ``total_NAME``), ``starved``, ``err`` with ``err_cycle``, ``err_stream`` (signature order)
    and ``err_kind`` (0: ``valid`` dropped, 1: payload changed, 2: an X or Z, 3: a read
    request of 0 words or past the memory), ``ioerr`` (a file read came up short; it stays
    set); per stream
    ``total_NAME``, ``count_NAME`` (handshakes so far), ``waited_NAME`` (cycles a beat
    waited, ``valid`` high and ``ready`` low, before the run ended), ``valid_NAME``,
    ``loaded_NAME``
    (sources: beats loaded so far), and the file strobes: a rising ``load_NAME`` reads
    ``data_NAME.bin`` into payload entries ``lo_NAME..hi_NAME``, ``sload_NAME`` reads
    ``sched_NAME.bin`` into schedule words ``slo_NAME..shi_NAME``, a sink's ``dump_NAME``
    writes its payload records ``dlo_NAME..dhi_NAME`` to ``data_NAME.hex``; a rising ``hdump``
    writes words ``hlo..hhi`` of every stream's handshake bits (cycle ``t`` in bit ``t % 32`` of
    word ``(t / 32) % SCHED_WORDS``) to ``hits_NAME.hex``; per plain output, ``NAME_start`` and
    ``NAME_end``.
    """
    streams, plain = ports(component)
    taken = {"clk", "rst", "run", "sched_loaded", "cycle", "done", "ended", "starved", "err",
             "err_cycle", "err_stream", "err_kind", "ioerr", "hdump", "hlo", "hhi", "word_begins"}
    clash = [p.name for p in plain if p.name in taken]
    if clash:
        raise ValueError(f"ports {clash} of the component clash with the harness's own")
    ld = (DEPTH - 1).bit_length()
    ls = (SCHED_WORDS - 1).bit_length()
    io = ["output reg clk", "input rst", "input run", "input [31:0] sched_loaded",
          "output reg [31:0] cycle", "output done", "output reg ended", "output reg starved",
          "output reg err",
          "output reg [31:0] err_cycle", "output reg [7:0] err_stream",
          "output reg [1:0] err_kind", "output ioerr", "input hdump", "input [31:0] hlo",
          "input [31:0] hhi"]
    # The memory agents' wires that their request streams' sections use.
    body = [f"  wire {s.name}_room, {s.name}_bad;" for s in streams if s.answers]
    body.append("  wire word_begins = cycle[4:0] == 5'd0;  // the first cycle of a handshake word")
    conns = [".clk(clk)", ".rst(rst)"]
    agents: list[str] = []
    for s in streams:
        n, w = s.name, s.width
        at = f"count_{n}[{ld - 1}:0]"
        io += [f"input [31:0] total_{n}", f"output reg [31:0] count_{n}",
               f"output reg [31:0] waited_{n}", f"output valid_{n}",
               f"input sload_{n}", f"input [31:0] slo_{n}", f"input [31:0] shi_{n}"]
        conns += [f".{n}__valid({n}_valid)", f".{n}__ready({n}_ready)",
                  f".{n}__payload({n}_payload)"]
        body += [
            f"  // stream {n}: {'source' if s.source else 'sink'}, {w} bits",
            f"  wire {n}_valid, {n}_ready;",
            f"  wire {_vec(w)}{n}_payload;",
            f"  reg [31:0] {n}_sched [0:{SCHED_WORDS - 1}];",
            *([] if s.answers else [f"  reg {_vec(w)}{n}_data [0:{DEPTH - 1}];"]),
            f"  reg [31:0] {n}_hit [0:{SCHED_WORDS - 1}];",
            f"  wire {n}_bit = {n}_sched[cycle[{ls + 4}:5]][cycle[4:0]];",
            f"  wire {n}_fire = {n}_valid & {n}_ready;",
            f"  assign valid_{n} = {n}_valid;",
            *_fread(f"sload_{n}", f"sched_{n}.bin", f"{n}_sched", f"slo_{n}", f"shi_{n}", 4),
        ]
        if s.answers:
            io += [f"input [31:0] lat_{n}", f"input [31:0] bpc_{n}", f"input mload_{n}",
                   f"input [31:0] mlo_{n}", f"input [31:0] mhi_{n}",
                   *([f"input [31:0] fault_{n}"] if s.last else [])]
            # After every stream's section: it uses its request stream's wires.
            agents += _memory_agent(s, _request_fields(component, s.answers))
        elif s.source:
            io += [f"input load_{n}", f"input [31:0] lo_{n}", f"input [31:0] hi_{n}",
                   f"input [31:0] loaded_{n}"]
            body += [
                f"  reg {n}_hold;",
                f"  wire {n}_want = run & (count_{n} < total_{n}) & ({n}_hold | {n}_bit);",
                f"  wire {n}_dry = {n}_want & ~(count_{n} < loaded_{n});",
                f"  assign {n}_valid = {n}_want & ~{n}_dry;",
                f"  assign {n}_payload = {n}_data[{at}];",
                *_fread(f"load_{n}", f"data_{n}.bin", f"{n}_data", f"lo_{n}", f"hi_{n}",
                        -(-w // 8)),
                "  always @(posedge clk) begin",
                f"    if (rst | ~run) begin count_{n} <= 32'd0; {n}_hold <= 1'b0; end",
                "    else begin",
                f"      {n}_hold <= {n}_valid & ~{n}_ready;",
                f"      if ({n}_fire) count_{n} <= count_{n} + 32'd1;",
                *_hit(n),
                "    end",
                "  end",
            ]
        else:
            io += [f"input dump_{n}", f"input [31:0] dlo_{n}", f"input [31:0] dhi_{n}"]
            body += [
                f"  wire {n}_dry = 1'b0;",
                # A request stream's ready also waits for room in the agent's queue.
                f"  assign {n}_ready = run & {n}_bit"
                + (f" & {s.requests}_room;" if s.requests else ";"),
                *_dump(f"dump_{n}", [(f"data_{n}.hex", f"{n}_data")], f"dlo_{n}", f"dhi_{n}"),
                "  always @(posedge clk) begin",
                f"    if (rst | ~run) count_{n} <= 32'd0;",
                "    else begin",
                f"      if ({n}_fire) begin",
                f"        {n}_data[{at}] <= {n}_payload;",
                f"        count_{n} <= count_{n} + 32'd1;",
                "      end",
                *_hit(n),
                "    end",
                "  end",
            ]
        # The protocol check: a beat offered and not taken stays offered, unchanged.
        body += [
            f"  reg {n}_was, {n}_took;",
            f"  reg {_vec(w)}{n}_last;",
            "  always @(posedge clk) begin",
            f"    {n}_was <= run & {n}_valid;",
            f"    {n}_took <= {n}_ready;",
            f"    {n}_last <= {n}_payload;",
            "  end",
            "  always @(posedge clk) begin",
            f"    if (rst | ~run) waited_{n} <= 32'd0;",
            f"    else if ({n}_valid & ~{n}_ready & ~ended) waited_{n} <= waited_{n} + 32'd1;",
            "  end",
            f"  wire {n}_dropped = run & {n}_was & ~{n}_took & ~{n}_valid;",
            # ``!==``: a payload bit that turns X (Icarus) while it waits is a change too.
            f"  wire {n}_changed = run & {n}_was & ~{n}_took & {n}_valid"
            f" & ({n}_payload !== {n}_last);",
            # An X or Z (Icarus) on valid or ready, or on a handed-over payload.
            f"  wire {n}_unknown = run & (((^{n}_valid) === 1'bx) | ((^{n}_ready) === 1'bx)"
            f" | ({n}_valid & {n}_ready & ((^{n}_payload) === 1'bx)));",
        ]
    body += agents
    body += _dump("hdump", [(f"hits_{s.name}.hex", f"{s.name}_hit") for s in streams],
                  "hlo", "hhi")
    outputs = [p for p in plain if p.output]
    for p in plain:
        conns.append(f".{p.name}({p.name})")
        if p.output:
            io += [f"output {_vec(p.width)}{p.name}",
                   f"output reg {_vec(p.width)}{p.name}_start",
                   f"output reg {_vec(p.width)}{p.name}_end"]
        else:
            io.append(f"input {_vec(p.width)}{p.name}")
    dry = " | ".join(f"{s.name}_dry" for s in streams) or "1'b0"
    checks = []
    for k, s in enumerate(streams):
        n = s.name
        bad = f" | {s.requests}_bad" if s.requests else ""
        checks += [f"        {'else ' if k else ''}if ({n}_dropped | {n}_changed | {n}_unknown"
                   f"{bad}) begin",
                   f"          err <= 1'b1; err_cycle <= cycle; err_stream <= 8'd{s.index};",
                   f"          err_kind <= {n}_unknown ? 2'd2 : ({n}_dropped | {n}_changed) ? "
                   f"{{1'b0, {n}_changed}} : 2'd3;",
                   "        end"]
    shorts = [f"sload_{s.name}_short" for s in streams]
    shorts += [f"load_{s.name}_short" for s in streams if s.source and not s.answers]
    shorts += [f"mload_{s.name}_short" for s in streams if s.answers]
    ioerr = " | ".join(shorts) or "1'b0"
    done = " & ".join(f"(count_{s.name} >= total_{s.name})" for s in streams) or "1'b1"
    lines = [
        f"module {top}(",
        ",\n".join(f"  {x}" for x in io),
        ");",
        # The clock toggles inside the simulator: no callback from the testbench per edge.
        "  initial clk = 1'b0;",
        f"  always #{PERIOD_NS // 2} clk = ~clk;",
        *body,
        f"  {dut} dut({', '.join(conns)});",
        f"  assign done = run & {done};",
        f"  assign ioerr = {ioerr};",
        "  always @(posedge clk) begin",
        "    if (rst | ~run) begin",
        "      cycle <= 32'd0; starved <= 1'b0; err <= 1'b0; err_cycle <= 32'd0;",
        "      err_stream <= 8'd0; err_kind <= 2'd0; ended <= 1'b0;",
        "    end else begin",
        "      cycle <= cycle + 32'd1;",
        f"      if (({dry}) | ~(cycle < sched_loaded)) starved <= 1'b1;",
        "      if (~err) begin",
        *checks,
        "      end",
        *(f"      if (cycle == 32'd0) {p.name}_start <= {p.name};" for p in outputs),
        "      if (done & ~ended) begin",
        "        ended <= 1'b1;",
        *(f"        {p.name}_end <= {p.name};" for p in outputs),
        "      end",
        "    end",
        "  end",
        "endmodule",
        "",
    ]
    return "\n".join(lines)
