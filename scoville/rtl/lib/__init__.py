"""What several RTL blocks share: the number formats (``formats``), parameter checks
(``params``), pipelines and lane units (``pipeline``), memory port signatures (``ports``),
performance counters (``counters``), combinational helpers (``comb``), FP32 and FP4 arithmetic
(``fp32``, ``fp4``), the block-scaled dot product's pieces (``blockdot``) and the blocks' own
formal invariants (``formal``). Nothing here
imports a block."""
