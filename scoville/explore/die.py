"""A die estimate for a ``blocks`` chip: what synthesis measures (its arrays and SRAM) plus
the parts we do not build, from public die analyses.

Synthesis gives a lower bound: the arrays' logic and the SRAM macros. A die also holds the
memory's PHYs and controllers, the chip-to-chip links', the host interface, a network on
chip and the rest (clocks, control, test). Their sizes, all from LLMCompass (Zhang et al.,
"LLMCompass: Enabling Efficient Hardware Design for Large Language Model Inference", ISCA
2024; its ``cost_model/cost_model.py`` and the A100 die-shot breakdown of
``ae/figure6/real_hardware/die_area.csv``):

- PHYs in mm^2 a unit, the same at every node ("memory controllers scale with process node,
  but PHYs do not"): an HBM2E stack's 10.45 (HBM3E's not published: HBM2E's is taken), an
  NVLink4 link's 0.965, a PCIe 5 lane's 0.64;
- controllers in transistors, at the node's logic density (:data:`scoville.synth.yosys.NODES`,
  as synthesis's logic): 552.7 M an HBM stack, 86.6 M a link, 5.37 M a PCIe lane;
- the network on chip and "other" as shares of the die: the A100's 76.44 and 40 of 823 mm^2
  (9.3% and 4.9%).

Both the HBM2E and NVLink4 figures stand for faster parts (an HBM3E stack, an NVLink 5 link):
the estimate is low there, and ``built`` is a blocks chip's arrays and SRAM alone.
"""

from __future__ import annotations

import math

from scoville.synth.yosys import NODES, UTILIZATION

__all__ = ["HBM_PHY_MM2", "HBM_STACK_TB_S", "LINK_GB_S", "NOC_SHARE", "OTHER_SHARE", "die_mm2",
           "die_parts"]

#: PHY area a unit, mm^2 (LLMCompass): an HBM2E stack (1024 bits), an NVLink4 link, a PCIe 5
#: lane.
HBM_PHY_MM2, LINK_PHY_MM2, PCIE_PHY_MM2 = 10.45, 0.965, 0.64
#: Controller transistors a unit (LLMCompass): an HBM2E stack, an NVLink4 link, a PCIe 5 lane.
HBM_CTRL_TR, LINK_CTRL_TR, PCIE_CTRL_TR = 552_743_000, 86_628_000, 5_372_100
#: The A100 die (GA100, 823 mm^2 in LLMCompass's breakdown): its on-chip interconnect and
#: "other" as shares of the die.
_A100 = {"cores": 476.25, "interconnect": 76.44, "global buffer": 119.31, "hbm phy": 58.0,
         "memory controller": 31.77, "link phy": 20.95, "link control": 0.0, "other": 40.0}
NOC_SHARE = _A100["interconnect"] / sum(_A100.values())
OTHER_SHARE = _A100["other"] / sum(_A100.values())


#: An HBM3E stack's bandwidth (1024 bits at 8 Gb/s a pin: a B200's 8 stacks give its 8 TB/s)
#: and a chip-to-chip link's each way (NVLink 5: 18 links give a B200's 900 GB/s): a chip's
#: stacks and links from its bandwidths.
HBM_STACK_TB_S, LINK_GB_S = 1.0, 50.0


def die_parts(built_mm2: float, *, node: str, hbm_tb_s: float, link_gb_s: float,
              pcie_lanes: int = 16) -> dict[str, float]:
    """:func:`die_mm2` of a chip with these bandwidths: as many HBM stacks and links as they
    take (:data:`HBM_STACK_TB_S`, :data:`LINK_GB_S`, rounded up)."""
    return die_mm2(built_mm2, node=node, hbm_stacks=math.ceil(hbm_tb_s / HBM_STACK_TB_S),
                   links=math.ceil(link_gb_s / LINK_GB_S), pcie_lanes=pcie_lanes)


def die_mm2(built_mm2: float, *, node: str, hbm_stacks: int, links: int,
            pcie_lanes: int = 16) -> dict[str, float]:
    """The die's parts in mm^2 and their ``total``: ``built`` (what synthesis measured),
    ``hbm`` (PHYs and controllers), ``links``, ``host`` (PCIe), and ``noc`` and ``other`` as
    their shares of the total."""
    density = NODES[node].mtr_per_mm2 * 1e6 * UTILIZATION

    def ctrl(transistors: float) -> float:
        return transistors / density

    parts = {"built": built_mm2,
             "hbm": hbm_stacks * (HBM_PHY_MM2 + ctrl(HBM_CTRL_TR)),
             "links": links * (LINK_PHY_MM2 + ctrl(LINK_CTRL_TR)),
             "host": pcie_lanes * (PCIE_PHY_MM2 + ctrl(PCIE_CTRL_TR))}
    total = sum(parts.values()) / (1 - NOC_SHARE - OTHER_SHARE)
    parts["noc"] = total * NOC_SHARE
    parts["other"] = total * OTHER_SHARE
    parts["total"] = total
    return parts
