"""The SoCs asc-onnx targets and the numbers its kernels and the emulator need (cann_facts.md §3.4, §7, §13)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .errors import AscOnnxError
from .hardware import ALIASES, CHIPS, chip_of, fact


@dataclass(frozen=True)
class Soc:
    """One target SoC.

    Attributes:
        name: the SoC family, which selects the kernels' code paths (``Ascend910B``).
        atc_soc: the chip: ATC's ``--soc_version`` (``Ascend910B4``), what estimates, the host tiling's core
            count and atc.sh all take.
        compute_unit: ``AddConfig`` / ``ASCEND_COMPUTE_UNIT`` string.
        ub_bytes: unified-buffer bytes the host tiling sees (GetCoreMemSize(UB)).
        vector_cores: vector cores the host tiling sees (GetCoreNumAiv()).
        has_data_copy_pad: DataCopyPad exists (not on 310P).
        has_bf16: bf16 vector data exists (not on 310P).
        npu_arch: ``__NPU_ARCH__`` its kernels are compiled for (selects SoC code paths at compile time).
        gm_bandwidth: global-memory bytes per second, for estimates only (:mod:`asc_onnx.hardware` has it with
            its source).
        l1_bytes / l0ab_bytes / l0c_bytes: the cube's memories as the host tiling sees them (GetCoreMemSize;
            910B's L1 less 256 B, as its UB), what CANN's Matmul tiling is given.
        saturates: the vector unit computes in saturation mode only (310P): a result beyond the type's range
            is its largest finite value, not an infinity.
    """

    name: str
    atc_soc: str
    compute_unit: str
    ub_bytes: int
    vector_cores: int
    has_data_copy_pad: bool
    has_bf16: bool
    npu_arch: int
    gm_bandwidth: float = 1.48e12
    l1_bytes: int = 524288 - 256
    l0ab_bytes: int = 65536
    l0c_bytes: int = 131072
    saturates: bool = False

    @property
    def chip(self) -> str:
        """The chip (ATC's ``--soc_version``) estimates are made for."""
        return self.atc_soc


SOCS = {
    # GetCoreMemSize(UB): 196608 - 256 (KFC) on 910B; the whole 256 KiB on 310P (platform_ascendc.cpp).
    "Ascend910B": Soc("Ascend910B", "Ascend910B1", "ascend910b", 196352, 48, True, True, 2201,
                      fact("Ascend910B", "gm_bandwidth")),
    "Ascend310P": Soc("Ascend310P", "Ascend310P3", "ascend310p", 262144, 8, False, False, 2002,
                      fact("Ascend310P", "gm_bandwidth"),
                      l1_bytes=1048576, l0c_bytes=262144, saturates=True),
}


def get_soc(name: str) -> Soc:
    """The SoC a ``--soc`` name means: a chip ATC names (``Ascend910B4``), with its own core count and bandwidth,
    or a family (``Ascend910B``), which names its chip (:data:`asc_onnx.hardware.ALIASES`)."""
    try:
        chip = chip_of(name)
    except KeyError:
        aliases = ", ".join(f"{a} (= {c})" for a, c in ALIASES.items())
        raise AscOnnxError(f"unknown SoC {name!r}; asc-onnx targets the chips {', '.join(CHIPS)}, "
                           f"and {aliases}") from None
    soc = SOCS[CHIPS[chip].family]
    cores = fact(chip, "ai_cores") if soc.name == "Ascend310P" else fact(chip, "vector_cores")
    return replace(soc, atc_soc=chip, vector_cores=int(cores), gm_bandwidth=fact(chip, "gm_bandwidth"))
