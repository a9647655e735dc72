"""The emulator's driver of an attention kernel: GM buffers and the workspace, the host tiling, vector cores one
after another (two per cube core), the files a run reads and the shapes it returns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..drive import (
    CUBE_FIELDS,
    CUBE_PLATFORM,
    concrete,
    cube_inputs,
    cube_run,
    cube_write_inputs,
    driver_helpers,
    keep_counters,
    one_output_bytes,
    param_reads,
)
from .lower import AttentionKernel
from .render import tiling_call
from .schedule import PRODUCT_FIELDS, WALK_FIELDS


def main_source(k: AttentionKernel, struct: str, prefix: str = "") -> str:
    """The driver program of an attention kernel."""
    nin = len(k.inputs)
    sk_axis = "shapes[1].size() - 2" if k.trans_k else "shapes[1].size() - 1"
    call = tiling_call(k, "qDims", "static_cast<uint32_t>(shapes[0].size())", "sk", "kvHeads", "dv", "maskDims",
                       "maskRank", "dtypeSize", 'dtypeName == "float"', 'dtypeName == "bfloat16_t"', "coreNum",
                       "platform", "coupled", "&tiling")
    parse = " ".join(f'if (key == "{f}") c.{f} = v;' for f in CUBE_FIELDS)
    at = 4 if k.has_keep else 3  # (the keep mask before it, of its shape)
    mask = (f"for (size_t i = 0; i < shapes[{at}].size(); ++i) maskDims[i] = shapes[{at}][i];\n"
            f"    const uint32_t maskRank = static_cast<uint32_t>(shapes[{at}].size());" if k.has_mask
            else "const uint32_t maskRank = 0;")
    if k.has_keep:
        mask += ('\n    if (shapes[3] != shapes[4]) return Report("tiling", "tiling refused the shape, reason 9");')
    return f"""// asc-onnx emulator driver for {k.op_type} (attention).
#include <cstring>
#include <fstream>
#include <iostream>
#include "kernel_operator.h"
#include "lib/matmul_intf.h"
#include "{prefix}op_kernel/{k.snake}.cpp"
#include "{prefix}op_host/{k.snake}_tiling_calc.h"

{driver_helpers(k)}
int Drive(int argc, char** argv) {{
    {cube_inputs(nin)}
    if (shapes[0].size() > 8) return Report("usage", "q of rank over 8");
    uint64_t qDims[8] = {{}};
    for (size_t i = 0; i < shapes[0].size(); ++i) qDims[i] = shapes[0][i];
    uint64_t maskDims[8] = {{}};
    {mask}
    const uint32_t sk = static_cast<uint32_t>(shapes[1][{sk_axis}]);
    const uint32_t dv = static_cast<uint32_t>(shapes[2].back());
    const uint32_t kvHeads = static_cast<uint32_t>(shapes[1][shapes[1].size() - 3]);
    {CUBE_PLATFORM}
    {struct} tiling{{}};
    const int rc = {call};
    if (rc != 0) return Report("tiling", "tiling refused the shape, reason " + std::to_string(rc));
    {{  // CANN's own tilings of the two products (cube_tiling.txt: qk.<field> / pv.<field>), where given
        std::ifstream f(dir + "/cube_tiling.txt");
        std::string key;
        int64_t v = 0;
        while (f >> key >> v) {{
            auto& c = key.rfind("qk.", 0) == 0 ? tiling.qkTiling : tiling.pvTiling;
            key = key.substr(3);
            {parse}
        }}
    }}
    {param_reads(k.num_params)}
    Fill(bufs[{nin}], bufs[0].size() / shapes[0].back() * dv);
    const uint32_t blocks = 2 * tiling.blockDim;  // two vector cores per cube core
    {cube_run(nin, k.snake)}
    std::cout << "{{\\"block_dim\\": " << blocks << ", \\"gm_read\\": " << st.gmReadBytes
              << ", \\"gm_write\\": " << st.gmWriteBytes
              << ", \\"time\\": " << asc_emu::TimingJson() << ", \\"ub_peak\\": " << st.ubPeak
              << ", \\"scalar\\": " << st.scalarInstr << ", \\"tile_length\\": " << tiling.chunkRows * tiling.rowPitch
              << ", \\"vec_elems\\": " << VecElems() << ", \\"cube\\": {{\\"macs\\": " << st.cube.macs
              << ", \\"blocks\\": " << st.cube.blocks << ", \\"a_read\\": " << st.cube.aReadBytes
              << ", \\"b_read\\": " << st.cube.bReadBytes << ", \\"c_bytes\\": " << st.cube.cBytes
              << ", \\"l1_peak\\": " << st.cube.l1Peak << ", \\"mBlock\\": " << tiling.mBlock
              << ", \\"items\\": " << tiling.items
              << ", \\"splits\\": " << tiling.splits << ", \\"units\\": " << tiling.units
              << ", \\"kv_block\\": " << tiling.kvBlock << ", \\"kv_blocks\\": " << tiling.kvBlocks
              << ", \\"workspace\\": " << tiling.userWorkspace << ", \\"workspace_hbm\\": " << st.gm.back().hbm
              {_tiling_record()}
              << "}}, \\"vec\\": {{";
    PrintVecAndClose();
    return 0;
}}
"""


def _tiling_record() -> str:
    """The driver's output lines (after the cube counters) of the tiling the run used."""
    parts = [f'", \\"{key}\\": " << tiling.{field}' for key, field in WALK_FIELDS.items()]
    parts.append('", \\"mask_broadcast\\": " << (tiling.maskRowStride == 0 ? 1 : 0)')
    parts += [f'", \\"{p}_{f}\\": " << tiling.{p}Tiling.{f}' for p in ("qk", "pv") for f in PRODUCT_FIELDS]
    return "\n              ".join(f"<< {x}" for x in parts)


def tiling_case(k: AttentionKernel, shapes: Sequence[Sequence[int]]) -> list[int]:
    """The case of ``cann/attention_tiling_main.cpp`` for inputs of ``shapes``: q's rank and dims, Sk, the KV
    heads, Dv, the mask's rank and dims."""
    q, kk, v = shapes[0], shapes[1], shapes[2]
    mask = list(shapes[-1]) if k.has_mask else []
    return [len(q), *q, kk[-2] if k.trans_k else kk[-1], kk[-3], v[-1], len(mask), *mask]


def output_shapes(k: AttentionKernel, inputs: Sequence[np.ndarray]) -> list[tuple[int, ...]]:
    """q's shape with v's head dim."""
    return [tuple(inputs[0].shape[:-1]) + (inputs[2].shape[-1],)]


write_inputs = cube_write_inputs


def inputs_at(k: AttentionKernel, inst: Any, np_dtype: type, lead: Sequence[int], rng: np.random.Generator,
              k_dim: int | None = None, n_dim: int | None = None) -> list[np.ndarray]:
    """q, k, v and the mask for output leading dims ``lead`` (``[.., heads, Sq]``): unit-variance q, k and v with
    ``k_dim`` keys (default: :func:`keys`), and a mask of its instance shape with HF's large negative in its last
    quarter of keys (rows never fully masked), after the keep mask where the op has one (1 where the mask is 0)."""
    lead = tuple(lead)
    d = concrete(inst.input_shapes[0], 1)[-1]
    dv = concrete(inst.input_shapes[2], 1)[-1]
    sq = lead[-1]
    sk = k_dim if k_dim is not None else keys(k, inst, sq)
    kv = lead[:-1]
    if k.kv_repeat:  # k and v of their own heads (grouped-query attention)
        kv = kv[:-1] + (concrete(inst.input_shapes[1], 1)[-3],)
    q = rng.standard_normal(lead + (d,))
    kk = rng.standard_normal(kv + ((sk, d) if k.trans_k else (d, sk)))
    v = rng.standard_normal(kv + (sk, dv))
    out = [q, kk, v]
    if k.has_mask:
        full = lead[:-1] + (sq, sk)
        given = list(inst.input_shapes[-1] or full)
        given = [1] * (len(full) - len(given)) + given
        # A dim of 1 broadcasts; any other (a number or a symbol) is the scores'.
        shape = [1 if d == 1 else f for d, f in zip(given, full)]
        mask = np.zeros(shape)
        mask[..., (3 * sk) // 4 + 1:] = -1e4
        if k.has_keep:  # Where's halves: keep 1 where the mask is 0, 0 (and the fill) past it
            out.append((mask == 0).astype(np.float64))
        out.append(mask)
    return [a.astype(np.float32).astype(np_dtype) for a in out]


def keys(k: AttentionKernel, inst: Any, sq: int, dim: int = 4) -> int:
    """The key count of a check with ``sq`` query rows: the instance's where the model fixes it; else Sq (a
    self-attention step), or for a decode step (one query row against a cache) ``16 * dim + 3``: keys over
    several 32-byte blocks with a ragged tail, so the softmax is taken over many (with one key it is 1)."""
    shape = inst.input_shapes[1] or ()
    fixed = shape[-2 if k.trans_k else -1] if len(shape) >= 2 else None
    if isinstance(fixed, int) and fixed > 0:
        return fixed
    return 16 * dim + 3 if sq == 1 else sq


def random_inputs(k: AttentionKernel, inst: Any, np_dtype: type, out_shape: tuple[int, ...],
                  rng: np.random.Generator, broadcast_shapes: Sequence[tuple[int, ...]] | None = None,
                  dim: int = 4) -> list[np.ndarray]:
    """Seeded inputs for a check: q, k, v (and the mask) for y's leading dims (:func:`keys` of them)."""
    return inputs_at(k, inst, np_dtype, out_shape[:-1], rng, keys(k, inst, out_shape[-2], dim))


def data_shape(k: AttentionKernel, inputs: Sequence[np.ndarray]) -> tuple[int, ...]:
    """y's shape."""
    return output_shapes(k, inputs)[0]


output_bytes = one_output_bytes
finish = keep_counters
