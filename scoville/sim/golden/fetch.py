"""What :class:`scoville.rtl.fetch.Fetch` moves: the read requests a run of commands makes and
the words it hands on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scoville.rtl.fetch import FetchConfig

__all__ = ["FetchResult", "fetch"]


@dataclass(frozen=True)
class FetchResult:
    """Attributes: ``requests``, every read request ``(addr, len)`` in order; ``words``, every
    word handed on, in order (the memory's ``memory[a]`` for each ``a`` of each request);
    ``rejected``, the commands rejected; ``accepted``, whether each command was."""

    requests: list[tuple[int, int]]
    words: list
    rejected: int
    accepted: list[bool]


def fetch(cfg: FetchConfig, memory: Sequence,
          commands: Sequence[tuple[int, int]]) -> FetchResult:
    """The requests and words of ``commands`` (``(addr, len)`` each, fields of the command's
    widths) against ``memory`` (a word per address): a command with ``len`` 0, or one past
    address ``2**addr_bits - 1``, is rejected; the others split into requests of ``burst``
    words and a last, shorter one."""
    burst = cfg.burst
    requests, words, accepted = [], [], []
    for addr, n in commands:
        if not (0 <= addr < 1 << cfg.addr_bits and 0 <= n < 1 << cfg.len_bits):
            raise ValueError(f"command ({addr}, {n}) does not fit 'addr_bits' = "
                             f"{cfg.addr_bits}, 'len_bits' = {cfg.len_bits}")
        ok = cfg.accepts(addr, n)
        accepted.append(ok)
        if not ok:
            continue
        for a in range(addr, addr + n, burst):
            requests.append((a, min(burst, addr + n - a)))
        words.extend(memory[addr:addr + n])
    return FetchResult(requests, words, accepted.count(False), accepted)
