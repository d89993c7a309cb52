"""KV-cache scratchpad: configuration errors, the storage formats against float64, the
reference model's page accounting, the cycle model, and the RTL on both simulators."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoville.rtl.kvcache import STATUS, KvCacheConfig, Op, Status
from scoville.rtl.lib.params import ParamError
from scoville.sim.cycles.kvcache import (
    engine_cycles,
    engine_timing,
    read_cycles,
    read_utilization,
    request_cycles,
    run_cycles,
    timing,
    units_timing,
)
from scoville.sim.cycles.stream import Schedule, Source
from scoville.sim.golden.kvcache import KvCacheModel, Request, decode_heads, encode_heads
from scoville.sim.golden.mx import dequantize_mxfp4, quantize_mxfp4
from scoville.testbenches.kvcache import Script, random_lines, random_script

from .simcheck import assert_passed, simulate


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"banks": 0}, "parameter 'banks' = 0 is out of range; allowed: 1..64"),
        ({"word_bits": 24}, "parameter 'word_bits' = 24 is out of range; allowed: 8, 16, 32"),
        ({"page_tokens": 3}, "parameter 'page_tokens' = 3 is out of range; allowed: 1, 2, 4"),
        ({"kv_fmt": "fp16"}, "parameter 'kv_fmt' = 'fp16' is not allowed; allowed: bf16, "),
        ({"kv_fmt": "mxfp4", "head_dim": 48}, "parameter 'head_dim' = 48 is not allowed with "
         "kv_fmt=mxfp4; allowed: a multiple of 32"),
        ({"bank_words": 100}, "parameter 'bank_words' = 100 holds fewer than 2 pages of 64 "
         "lines; allowed: >= 128"),
    ],
)
def test_bad_config_is_one_line_naming_the_parameter(params, text):
    with pytest.raises(ParamError) as err:
        KvCacheConfig(**params)
    assert text in str(err.value)
    assert "\n" not in str(err.value)


def test_capacity_follows_the_format():
    """GPT-OSS-120B: 8 KV heads of dimension 64; 16 banks of 64-bit words hold a bf16 head
    vector in one line, fp8 in half a line (padded to one), mxfp4 in 272 bits."""
    base = dict(banks=16, word_bits=64, bank_words=65536, page_tokens=16, kv_heads=8,
                head_dim=64)
    bf16 = KvCacheConfig(**base, kv_fmt="bf16")
    assert (bf16.token_bits, bf16.token_lines, bf16.page_lines) == (1024, 1, 256)
    assert bf16.pages == 256 and bf16.max_tokens == 4096 and bf16.packing == 1.0
    mx = KvCacheConfig(**{**base, "banks": 17, "word_bits": 16}, kv_fmt="mxfp4")
    assert mx.token_bits == 64 * 4 + 2 * 8 == mx.line_bits and mx.packing == 1.0


@pytest.mark.parametrize("fmt", ["bf16", "fp8_e4m3"])
def test_float_formats_round_like_ml_dtypes_and_within_half_an_ulp(fmt):
    cfg = KvCacheConfig(kv_fmt=fmt, head_dim=32, kv_heads=2)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 32)) * 2.0 ** rng.integers(-4, 5, (2, 1))
    got = decode_heads(cfg, encode_heads(cfg, x))
    dtype = ml_dtypes.bfloat16 if fmt == "bf16" else ml_dtypes.float8_e4m3fn
    assert np.array_equal(got, x.astype(dtype).astype(np.float64))
    mant = 7 if fmt == "bf16" else 3
    tiny = 2.0 ** -6 if fmt == "fp8_e4m3" else 0.0
    assert np.all(np.abs(got - x) <= np.maximum(np.abs(x) * 2.0 ** -(mant + 1), tiny))


def test_mxfp4_stores_codes_then_scales_and_decodes_as_the_mx_model():
    cfg = KvCacheConfig(kv_fmt="mxfp4", head_dim=64, kv_heads=1, banks=17, word_bits=16)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 64))
    codes, scales = quantize_mxfp4(x, axis=-1)
    (line,) = encode_heads(cfg, x)
    assert line & 0xF == codes[0, 0] and line >> 256 == int(scales[0, 0]) | int(scales[0, 1]) << 8
    want = dequantize_mxfp4(codes, scales, axis=-1).astype(np.float64)
    assert np.array_equal(decode_heads(cfg, [line]), want)
    # Within half an E2M1 step of the block's scale, against float64.
    step = 2.0 ** (scales.astype(np.int64) - 127).repeat(32, axis=-1)
    assert np.all(np.abs(want - x) <= step)


def test_padding_bits_are_zero():
    cfg = KvCacheConfig(kv_fmt="fp8_e4m3", head_dim=40, banks=4, word_bits=32)
    lines = encode_heads(cfg, np.full((2, 40), -448.0))
    assert cfg.token_lines == 3 and len(lines) == 6
    assert lines[2] >> (320 - 256) == 0 and lines[5] >> (320 - 256) == 0


def test_fork_shares_pages_and_append_copies_a_shared_partly_filled_page():
    cfg = KvCacheConfig(page_tokens=4, bank_words=256)
    rng = np.random.default_rng(1)
    sc = Script(cfg)
    a = sc("alloc").seq
    for _ in range(6):
        sc.append(a, rng)
    assert sc.model.free == cfg.pages - 2
    b = sc("fork", seq=a, count=5)
    assert (b.status, b.length, b.walked, b.free) == (Status.OK, 5, 2, cfg.pages - 2)
    out = sc.append(b.seq, rng)
    assert out.copied and out.new_page and out.free == cfg.pages - 3
    out = sc.append(a, rng)
    assert not out.copied and not out.new_page
    ra = sc("read", seq=a, count=5)
    rb = sc("read", seq=b.seq, count=5)
    assert ra.data == rb.data and len(ra.data) == 5 * cfg.token_lines
    assert sc("free", seq=a).walked == 2 and sc.model.free == cfg.pages - 2
    assert sc("free", seq=b.seq).walked == 2 and sc.model.free == cfg.pages


def test_full_cache_answers_full_and_changes_nothing():
    cfg = KvCacheConfig(bank_words=128)
    rng = np.random.default_rng(2)
    sc = Script(cfg)
    s = sc("alloc").seq
    for _ in range(cfg.max_tokens):
        assert sc.append(s, rng).status == Status.OK
    before = sc("read", seq=s, kv=1, head=1, start=0, count=cfg.max_tokens).data
    full = sc.append(s, rng)
    assert (full.status, full.length, full.free) == (Status.FULL, cfg.max_tokens, 0)
    assert sc("read", seq=s, kv=1, head=1, start=0, count=cfg.max_tokens).data == before


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), page_tokens=st.sampled_from([1, 2, 4, 8]),
       max_seqs=st.integers(1, 5), k_only=st.integers(0, 1))
def test_random_scripts_leak_no_page_and_reads_return_what_was_appended(seed, page_tokens,
                                                                         max_seqs, k_only):
    cfg = KvCacheConfig(page_tokens=page_tokens, max_seqs=max_seqs, bank_words=256,
                        k_only=k_only)
    sc = random_script(cfg, np.random.default_rng(seed), 300)
    assert sc.model.free == cfg.pages and not sc.model.refs and not sc.model.seqs
    # Independently of the page model: every read returns the lines of the appends of its
    # sequence's history (a fork inherits the first T tokens of its source).
    history: dict[int, list] = {}
    for req, out in zip(sc.requests, sc.outcomes, strict=True):
        if out.status != Status.OK:
            continue
        if req.op == Op.ALLOC:
            history[out.seq] = []
        elif req.op == Op.APPEND:
            history[req.seq].append(req.lines)
        elif req.op == Op.FORK:
            history[out.seq] = history[req.seq][: req.count]
        elif req.op == Op.READ:
            tl = cfg.token_lines
            first = (req.kv * (1 - k_only) * cfg.kv_heads + req.head) * tl + req.line0
            width = req.nlines or tl - req.line0
            want = [x for t in history[req.seq][req.start: req.start + req.count]
                    for x in t[first: first + width]]
            assert out.data == want


@pytest.mark.parametrize("seed", range(8))
def test_the_unit_models_are_the_fast_loop(seed):
    """The cache's unit model (what the attention model steps), its unit models composed as
    the RTL composes its units (the walk, the append, the read engine, each from its RTL
    unit's docstring) and :func:`timing`'s one loop are one rule: the same handshakes and
    counters on random scripts (forks, copies on write, windowed reads), gaps and
    back-pressure."""
    rng = np.random.default_rng(seed)
    cfg = KvCacheConfig(page_tokens=int(rng.choice([1, 2, 4])), max_seqs=3, bank_words=256)
    sc = random_script(cfg, rng, 300)
    gap = [0.0, 0.3, 0.8][seed % 3]

    def streams():
        return ({name: Source(Schedule([seed, k], gap)) for k, name in enumerate(("req", "wd"))},
                {name: Schedule([seed, 5 + k], gap) for k, name in enumerate(("rd", "resp"))})

    fast = timing(cfg, sc.outcomes, *streams())
    for model in (engine_timing, units_timing):
        stepped = model(cfg, sc.outcomes, *streams())
        assert stepped.handshakes == fast.handshakes, model.__name__
        assert stepped.counters == fast.counters, model.__name__


def test_every_bad_request_answers_its_status():
    cfg = KvCacheConfig(max_seqs=2)
    rng = np.random.default_rng(3)
    model = KvCacheModel(cfg)
    s = model.apply(Request(Op.ALLOC)).seq
    model.apply(Request(Op.APPEND, seq=s, lines=random_lines(cfg, rng)))
    cases = [
        (Request(7, seq=s), "bad_op"),
        (Request(Op.FREE, seq=1), "no_seq"),
        (Request(Op.READ, seq=200, count=1), "no_seq"),
        (Request(Op.READ, seq=s, head=2, count=1), "bad_head"),
        (Request(Op.READ, seq=s, start=1, count=1), "bad_range"),
        (Request(Op.READ, seq=s, count=0), "bad_range"),
        (Request(Op.FORK, seq=s, count=2), "bad_range"),
        (Request(Op.APPEND, seq=1, lines=random_lines(cfg, rng)), "no_seq"),
    ]
    for req, status in cases:
        assert model.apply(req).status == STATUS[status], (req, status)
    model.apply(Request(Op.ALLOC))
    assert model.apply(Request(Op.ALLOC)).status == Status.TOO_MANY
    assert model.apply(Request(Op.FORK, seq=s, count=1)).status == Status.TOO_MANY


def test_read_cycles_are_a_fixed_latency_plus_the_lines():
    cfg = KvCacheConfig(banks=8, word_bits=32, bank_words=4096, page_tokens=16, kv_heads=8,
                        head_dim=64)
    assert cfg.token_lines == 64 * 16 // (8 * 32)
    for tokens in (1, 17, 1000):
        assert read_cycles(cfg, tokens) == 3 + tokens * 4
    assert read_utilization(cfg, 50) >= 0.99 > read_utilization(cfg, 49)


def test_request_costs_and_the_time_line_of_both_engines():
    cfg = KvCacheConfig(page_tokens=4)
    rng = np.random.default_rng(4)
    sc = Script(cfg)
    b = cfg.append_beats
    outs = [
        sc("alloc"), sc.append(0, rng), sc.append(0, rng), sc("fork", seq=0, count=2),
        sc("read", seq=0, count=2), sc.append(1, rng), sc("read", seq=0, count=2),
        sc.append(0, rng), sc("free", seq=0), sc("read", seq=0),
    ]
    costs = [request_cycles(cfg, o) for o in outs]
    pl = cfg.page_lines
    assert costs == [3, 6 + b, 5 + b, 4 + 3, 3, 6 + pl + 1 + b, 3, 5 + b, 4 + 3, 3]
    assert [engine_cycles(o) for o in outs] == [0, 0, 0, 0, 9, 0, 9, 0, 0, 0]
    # Time line: the first read decodes at t + 1 = 3 + (6 + b) + (5 + b) + 7 + 1 and its
    # engine is idle 8 + 2 cycles later; the copy-on-write append taken 2 cycles after the
    # decode waits in its fourth cycle until then; the append after the second read runs
    # beside it, and the free waits for it.
    t = 3 + (6 + b) + (5 + b) + 7
    idle = t + 1 + 8 + 2
    t += 3
    t += costs[5] + max(0, idle - (t + 3))
    decode = t + 1
    idle = decode + 8 + 2
    t = decode + 2
    t += costs[7]
    t = max(t + 1, idle) + costs[8] - 1
    t += 3
    assert run_cycles(cfg, outs) == t


# Each on both simulators: the default with 10,000 random requests (the workload's default);
# with 3,000: the CLI example, fp8 with two tokens per page and wide words, mxfp4
# packed exactly in 17 banks, two sequences of one head storing K alone (``k_only``: V reads
# take K's lines). Reads take random line windows. Every one can fork (max_seqs >= 2)
# and copy on write (page_tokens >= 2).
CONFIGS = [
    ({}, 10_000),
    ({"banks": 8, "page_tokens": 16}, 3000),
    ({"kv_fmt": "fp8_e4m3", "banks": 2, "word_bits": 64, "page_tokens": 2, "max_seqs": 3,
      "bank_words": 256}, 3000),
    ({"kv_fmt": "mxfp4", "head_dim": 64, "banks": 17, "word_bits": 16, "page_tokens": 8,
      "max_seqs": 5, "bank_words": 512}, 3000),
    ({"max_seqs": 2, "kv_heads": 1, "page_tokens": 2, "bank_words": 64, "k_only": 1}, 3000),
]


@pytest.mark.sim
@pytest.mark.alternate_sims
@pytest.mark.parametrize(("params", "count"), CONFIGS)
def test_kvcache_rtl(simulator, seed, params, count):
    result = simulate("kvcache", simulator, seed, count=count, gap=0.3, backpressure=0.3,
                      **params)
    assert_passed(result)
    names = {"test_edges", "test_keep_up", "test_long_read", "test_reset", "test_workload"}
    assert {t.name for t in result.tests} == names
    work = result.metrics["test_workload"]
    assert work["requests"] >= count
    assert work["counter_stalls"] > 0 and work["read_lines"] > 0
    # Fork and copy-on-write are reached, in the directed test and in the random requests.
    assert result.metrics["test_edges"]["copies"] > 0 and work["copies"] > 0
    statuses = result.metrics["test_edges"]["statuses"]
    assert all(statuses.values()), statuses
    long = result.metrics["test_long_read"]
    cfg = KvCacheConfig(**params)
    lines = cfg.max_tokens * cfg.token_lines
    assert long["read_bandwidth_utilization"] == pytest.approx(lines / (lines + 1))


@pytest.mark.sim
def test_kvcache_rtl_heavy_gaps_and_back_pressure(simulator, seed):
    """90% of cycles without a request or line offered and 90% without ``ready`` on reads and
    answers: every handshake still where the timed model puts it."""
    result = simulate("kvcache", simulator, seed, count=400, gap=0.9, backpressure=0.9,
                      max_seqs=2, page_tokens=2, bank_words=128)
    assert_passed(result)
