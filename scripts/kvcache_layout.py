#!/usr/bin/env python3
"""KV-cache scratchpad layout: one page's lines across the banks, and paged sequences.

Left: one page of :class:`scoville.rtl.kvcache.KvCacheConfig` (4 banks of 32-bit words, 4 tokens
a page, 2 KV heads of 32 bf16 elements), the banks as columns and the page's lines as rows,
coloured by (K/V, head) region. Right: the page tables of a sequence and of its fork, the
physical pages they point to with their reference counts, the free list, and the copy-on-write
of the shared, partly filled page when the fork appends. Writes ``docs/kvcache-layout.svg``
(needs matplotlib: ``pip install -e '.[bench]'``).

Usage: ``python scripts/kvcache_layout.py [-o docs/kvcache-layout.svg]``
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from scoville.rtl.kvcache import KvCacheConfig

CONFIG = KvCacheConfig(banks=4, word_bits=32, page_tokens=4, kv_heads=2, head_dim=32, kv_fmt="bf16")
#: Region colours: K heads blue, V heads orange (cycled when there are more heads).
COLORS = {0: ("#4e79a7", "#a0cbe8"), 1: ("#f28e2b", "#ffbe7d")}
SEQ0_TOKENS, FORK_TOKENS = 10, 6  # seq 0's length; seq 1 = fork of its first FORK_TOKENS
SEQ0_PAGES = (3, 0, 5)  # seq 0's page table; the free list's top is popped by copy-on-write
FREE = (7, 6, 4, 2, 1)


def draw_page(ax, cfg: KvCacheConfig) -> None:
    """The lines of one page: banks across, lines down, one colour per (K/V, head) region."""
    tl, head_lines = cfg.token_lines, cfg.page_tokens * cfg.token_lines
    for region in range(2 * cfg.kv_heads):
        kv, head = divmod(region, cfg.kv_heads)
        top = region * head_lines
        name = f"{'KV'[kv]} head {head}"
        color = COLORS[kv][head % 2]
        ax.add_patch(Rectangle((0, top), cfg.banks, head_lines, label=name, color=color))
        ax.text(cfg.banks + 0.15, top + head_lines / 2, name, va="center")
        for slot in range(cfg.page_tokens):
            ax.text(cfg.banks / 2, top + (slot + 0.5) * tl, f"t{slot}", ha="center",
                    va="center", fontsize=7, zorder=3,
                    bbox={"facecolor": color, "edgecolor": "none", "pad": 0.3})
    for line in range(cfg.page_lines + 1):
        width = 2 if line % head_lines == 0 else 0.9 if line % tl == 0 else 0.2
        ax.plot([0, cfg.banks], [line, line], color="k", linewidth=width)
    for bank in range(cfg.banks + 1):
        ax.plot([bank, bank], [0, cfg.page_lines], color="k", linewidth=0.9)
    # A streaming read of the last K head: down its region, a line per cycle.
    top = (cfg.kv_heads - 1) * head_lines
    ax.annotate("", (cfg.banks + 1.9, top + head_lines), (cfg.banks + 1.9, top),
                arrowprops={"arrowstyle": "-|>", "color": "k", "linewidth": 1.5})
    ax.text(cfg.banks + 2.0, top + head_lines / 2, "read", va="center", rotation=-90)
    ax.set_xticks([b + 0.5 for b in range(cfg.banks)], [f"bank {b}" for b in range(cfg.banks)],
                  fontsize=7)
    ax.xaxis.tick_top()
    ax.set_yticks(range(0, cfg.page_lines, tl))
    ax.tick_params(axis="y", labelsize=7)
    ax.set_ylabel("line in page")
    ax.set_ylim(cfg.page_lines, 0)
    ax.spines[["right", "bottom", "top"]].set_visible(False)
    ax.set_title(f"one page: 2 x kv_heads regions\nx page_tokens tokens x token_lines lines\n"
                 f"= 2 x {cfg.kv_heads} x {cfg.page_tokens} x {tl} = {cfg.page_lines} lines "
                 f"of {cfg.banks} x {cfg.word_bits} bits", loc="left", x=-0.15)
    ax.legend(loc="upper left", bbox_to_anchor=(-0.15, -0.01), ncols=2, fontsize=8,
              frameon=False)
    ax.text(-0.15, -0.14, "a streaming read of one head goes down its\nregion line by line: "
            "one word from every\nbank per cycle", transform=ax.transAxes, va="top")


def box(ax, x, y, w, text, **kw) -> None:
    ax.add_patch(Rectangle((x, y - 0.3), w, 0.6, **{"fill": False, "linewidth": 1, **kw}))
    ax.text(x + w / 2, y, text, ha="center", va="center", color=kw.get("edgecolor", "k"))


def arrow(ax, a, b, **kw) -> None:
    kw = {"arrowstyle": "-|>", "color": "k", "shrinkA": 0, "shrinkB": 0, **kw}
    ax.annotate("", b, a, arrowprops=kw)


def draw_tables(ax, cfg: KvCacheConfig) -> None:
    """Two sequences' page tables, the physical pages, the free list and a copy-on-write."""
    pt, red = cfg.page_tokens, "C3"
    new, cow = FREE[0], SEQ0_PAGES[FORK_TOKENS // pt]  # cow: the page of token FORK_TOKENS
    refs = {p: 1 + (i < -(-FORK_TOKENS // pt)) for i, p in enumerate(SEQ0_PAGES)}
    assert FORK_TOKENS % pt and refs[cow] > 1, "the fork's next append must hit a shared page"
    shown = max(*SEQ0_PAGES, *FREE) + 1
    py = {p: 10 - 0.85 * p for p in range(shown)}  # physical page p's row
    ax.text(5.2, 10.6, f"physical pages 0..{shown - 1} (of {cfg.pages})")
    for p in range(shown):
        ref = {cow: f"ref {refs[cow]} \u2192 {refs[cow] - 1}", new: "free \u2192 ref 1"}.get(
            p, f"ref {refs[p]}" if p in refs else "free")
        box(ax, 5.2, py[p], 2.6, f"page {p}: {ref}", facecolor="0.87", fill=p in refs,
            edgecolor=red if p in (cow, new) else "k")
    seqs = [(0, SEQ0_TOKENS, 10, f"seq 0: {SEQ0_TOKENS} tokens"),
            (1, FORK_TOKENS, 5, f"seq 1 = fork(seq 0, T={FORK_TOKENS})")]
    for seq, tokens, y0, title in seqs:
        ax.text(0, y0 + 0.6, f"{title}, page table")
        for i in range(-(-tokens // pt)):
            y, last = y0 - i, min(tokens, (i + 1) * pt) - 1
            box(ax, 0, y, 2.4, f"[{i}] t{i * pt}..t{last}")
            p = SEQ0_PAGES[i]
            moved = seq == 1 and p == cow
            arrow(ax, (2.4, y), (5.2, py[p]), color="0.6" if moved else "k",
                  linestyle=":" if moved else "-")
            if moved:
                arrow(ax, (2.4, y - 0.1), (5.2, py[new]), color=red, linestyle="--")
                ax.text(0, y - 0.5, f"append t{FORK_TOKENS} to seq 1: page {p} is\n"
                        f"shared (ref {refs[p]}) and part filled, so it\nis first copied to "
                        f"page {new} (popped from\nthe free list) and [{i}] re-pointed\n"
                        "(dotted: before, dashed: after)", color=red, va="top")
    arrow(ax, (7.8, py[cow]), (7.8, py[new]), color=red, linestyle="--",
          connectionstyle="arc3,rad=-0.35")
    ax.text(9.3, (py[cow] + py[new]) / 2, f"copy-on-write\n({cfg.page_lines} lines)",
            color=red, va="center")
    y = py[shown - 1] - 1.5
    ax.text(5.4 + 0.52 * len(FREE), y, "free list (stack),\ntop first", va="center")
    for k, p in enumerate(FREE):
        box(ax, 5.2 + 0.52 * k, y, 0.52, str(p), edgecolor=red if p == new else "k")
    arrow(ax, (5.46, y + 0.3), (5.46, py[new] - 0.3), color=red, linestyle="--")
    ax.text(5.6, (y + py[new]) / 2, "pop", color=red, va="center")
    ax.set_xlim(-0.2, 11)
    ax.set_ylim(y - 0.6, 11)
    ax.axis("off")


def figure(cfg: KvCacheConfig = CONFIG):
    """The whole picture: the page on the left, the page tables on the right."""
    matplotlib.use("Agg")
    plt.rcParams["font.size"] = 9
    fig = plt.figure(figsize=(10, 7))
    draw_page(fig.add_axes((0.08, 0.2, 0.27, 0.66), xlim=(0, cfg.banks + 2.4)), cfg)
    draw_tables(fig.add_axes((0.39, 0.1, 0.6, 0.8)), cfg)
    return fig


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path,
                        default=Path(__file__).resolve().parent.parent / "docs" /
                        "kvcache-layout.svg", help="SVG to write")
    args = parser.parse_args(argv)
    plt.rcParams["svg.hashsalt"] = "scoville"  # fixed ids: the same picture, the same file
    (fig := figure()).savefig(args.output, format="svg", metadata={"Date": None})
    plt.close(fig)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
