// asc-onnx: the tiling arithmetic every row kernel shares (shipped into op_host/ with each row op).
// A plain function of shapes and platform numbers: CANN's host build and the asc-onnx emulator compile this
// same code. What varies by op is its Shape parameter (the op's <op>_tiling_calc.h defines it): the counts of
// what one tile row holds in the unified buffer, by kind, and the op's schedule.
//
// Returns 0 and fills t, or a non-zero reason (each op's <op>_tiling_calc.h lists them in words).
// No include guard: each op's <op>_tiling_calc.h (itself guarded) includes it once, and the emulator's batch
// programs compile several ops in one unit, each op's copy inside a namespace of its own.

#include <cstdint>

namespace asc_onnx {

// Shape: static constexpr members
//   in, out, io, statOut, vecIn    input rows, output rows, both, statistic outputs, weight rows (staged in T)
//   statSlots, vec                 fp32 stat registers (with a partial, a max and a sum), fp32 weight rows
//   rowRegsWhole32, rowRegsSplit32, rowRegsAll   fp32 row registers: fp32 I/O whole rows, fp32 I/O split, else
//   bcastInputs                    mask inputs (rows repeated along leading axes)
//   bufferNum, minCoreBytes, residentShare       the schedule: buffers per queue, data per core, a mask's UB share
//   firstOption                    the first of kBufferings to try (the schedule's buffering)
constexpr uint32_t kMaxLead = 6;          // leading axes the kernel maps
constexpr uint64_t kStatSlot = 16;        // elements of T per statistic slot (64 bytes of fp32)
constexpr uint64_t kFoldMax = 1024;       // 910B rows up to this long fold their 64-column chunks
constexpr uint64_t kWeightShare = 2;      // split mode keeps the weights when they fit UB / this
constexpr uint64_t kMaxTileRows = 4095;   // rows per tile at most
constexpr uint32_t kBufferings = 3;       // (in, out) buffers per queue: (2, 2), (2, 1), (1, 1)
constexpr uint32_t kInOptions[kBufferings] = {2, 2, 1};
constexpr uint32_t kOutOptions[kBufferings] = {2, 1, 1};

// rowDims: trailing dims of the data that form one row (the op's normalized axes).
template <typename Shape, typename Tiling>
inline int RowTiling(const uint64_t* dims, uint32_t rank, uint32_t rowDims, const uint64_t* const* bcastDims,
                     const uint32_t* bcastRanks, uint32_t dtypeSize, uint32_t coreNum, uint64_t ubBytes,
                     bool hasDataCopyPad, Tiling* t)
{
    constexpr int nb = static_cast<int>(Shape::bcastInputs);
    if (rank < rowDims || rowDims == 0 || coreNum == 0) return 1;
    uint64_t rowLength = 1;
    for (uint32_t i = rank - rowDims; i < rank; ++i) rowLength *= dims[i];
    uint64_t rows = 1;
    for (uint32_t i = 0; i < rank - rowDims; ++i) rows *= dims[i];
    if (rowLength == 0 || rows == 0) return 1;
    const uint64_t alignElems = 32 / dtypeSize;
    if (!hasDataCopyPad && rowLength < alignElems) return 3;
    // 310P rows that end inside a 32-byte block store their last 32 bytes through edgeBuf, one window
    // per tile row and one for a load.
    const uint64_t edge = !hasDataCopyPad && rowLength % alignElems != 0 ? 32 : 0;
    if constexpr (Shape::statOut != 0) {
        if (!hasDataCopyPad) return 4;
    }
    if (rank - rowDims > kMaxLead) return 5;
    t->leadCount = rank - rowDims;
    for (uint32_t i = 0; i < kMaxLead; ++i) t->leadDims[i] = i < t->leadCount ? dims[i] : 1;
    // A mask input's row index along each leading axis: 0 where it repeats (dim 1), else its row count
    // below that axis.
    for (int j = 0; j < nb; ++j) {
        uint64_t step = 1;
        for (int i = static_cast<int>(kMaxLead) - 1; i >= 0; --i) {
            t->bcastStride[j][i] = 0;
            if (static_cast<uint32_t>(i) >= t->leadCount) continue;
            const int k = static_cast<int>(bcastRanks[j]) - static_cast<int>(rank - i);
            const uint64_t d = k >= 0 ? bcastDims[j][k] : 1;
            t->bcastStride[j][i] = d == 1 ? 0 : step;
            step *= d;
        }
    }
    t->rows = rows;
    t->rowLength = rowLength;
    t->invLength = 1.0f / static_cast<float>(rowLength);
    t->rowStride = (rowLength + alignElems - 1) / alignElems * alignElems;
    // Cores: at least minCoreBytes of data each (smaller slices cost launches and weight re-reads).
    const uint64_t minRows = (Shape::minCoreBytes + rowLength * dtypeSize - 1) / (rowLength * dtypeSize);
    uint64_t blockDim = rows / minRows > 0 ? rows / minRows : 1;
    if (blockDim > coreNum) blockDim = coreNum;
    uint64_t coreRows = rows / blockDim + (rows % blockDim > 0 ? 1 : 0);
    // Row registers in the register buffer: with fp32 I/O the inputs' are their tiles, and whole rows
    // compute the outputs straight into theirs.
    const uint64_t rowRegs = dtypeSize == 4 ? Shape::rowRegsWhole32 : Shape::rowRegsAll;
    const uint64_t splitRegs = dtypeSize == 4 ? Shape::rowRegsSplit32 : Shape::rowRegsAll;
    // Whole rows, per row of a tile: inBuffers x in input and outBuffers x out output tiles of T, rowRegs fp32
    // row registers, statSlots stat registers, outBuffers x statOut stat outputs of kStatSlot.
    const uint64_t vecRow = (t->rowStride + 63) / 64 * 64;
    const uint64_t tmpElems = (2 * ((t->rowLength + 63) / 64) + 7) / 8 * 8;
    // Per tile: register round-up to 64 elements, the reduction scratch, vec fp32 weight rows (staged through
    // the register buffer), 32-byte padding of every buffer.
    const uint64_t fixed = 256ull * rowRegs + 512ull * Shape::statSlots + 4 * tmpElems + 4ull * Shape::vec * vecRow +
                           32ull * (2 * (Shape::io + Shape::statOut) + 5 + Shape::vecIn) + 2 * edge;
    // 910B rows of 65 to kFoldMax elements fold their 64-column chunks into 64 fp32 lanes per row.
    const uint64_t foldBytes = hasDataCopyPad && rowLength > 64 && rowLength <= kFoldMax ? 256 : 0;
    // One row of a tile under a buffering: its I/O tiles, row registers, stat slots and stat outputs.
    const auto rowBytes = [&](uint64_t inBufs, uint64_t outBufs) {
        return (inBufs * Shape::in + outBufs * Shape::out) * t->rowStride * dtypeSize + 4 * rowRegs * t->rowStride +
               4ull * kStatSlot * Shape::statSlots + outBufs * kStatSlot * Shape::statOut * dtypeSize + edge +
               foldBytes;
    };
    // A mask that repeats along the leading axes before its own (a [1, 1, S, S] mask over [B, H, S, S])
    // and that a core's rows would read more than once: the cores split the mask's rows instead and each
    // walks its rows under every repeat, holding its slice of the mask in UB: the mask is read once.
    t->groupRows = 0;
    t->groupRepeats = 1;
    if constexpr (nb == 1) {
        uint32_t first = t->leadCount;  // the mask's own leading axes are [first, leadCount)
        while (first > 0) {
            const int k = static_cast<int>(bcastRanks[0]) - static_cast<int>(rank - (first - 1));
            if ((k >= 0 ? bcastDims[0][k] : 1) != dims[first - 1]) break;
            --first;
        }
        bool repeats = true;  // and it is 1 along every axis before them
        uint64_t maskRows = 1;
        for (uint32_t i = 0; i < t->leadCount; ++i) {
            const int k = static_cast<int>(bcastRanks[0]) - static_cast<int>(rank - i);
            const uint64_t d = k >= 0 ? bcastDims[0][k] : 1;
            if (i < first && d != 1) repeats = false;
            maskRows *= d;
        }
        const uint64_t cores = blockDim < maskRows ? blockDim : maskRows;
        const uint64_t slice = (maskRows + cores - 1) / cores;
        const uint64_t sliceBytes = (slice * t->rowStride * dtypeSize + 31) / 32 * 32;
        if (repeats && maskRows < rows && maskRows >= coreRows && sliceBytes <= ubBytes / Shape::residentShare &&
            fixed + sliceBytes + rowBytes(1, 1) <= ubBytes) {  // a single-buffered row still fits
            t->groupRows = maskRows;
            t->groupRepeats = rows / maskRows;
            blockDim = cores;
            coreRows = slice;
        }
    }
    t->blockDim = static_cast<uint32_t>(blockDim);
    // Rows of a core (of the mask's rows when grouped, each walked groupRepeats times).
    const uint64_t walked = t->groupRows != 0 ? t->groupRows : rows;
    t->rowsPerCore = walked / blockDim;
    t->extraRows = walked % blockDim;
    // A mask input with fewer rows than a core reads (one per data row: a position embedding over a
    // batch, a mask over heads) that fits the resident share of the UB is loaded whole once per core and its
    // rows gathered from UB; others stream one mapped row per data row.
    uint64_t residentBytes = 0;
    for (int j = 0; j < nb; ++j) {
        uint64_t maskElems = 1;
        for (uint32_t i = 0; i < bcastRanks[j]; ++i) maskElems *= bcastDims[j][i];
        const uint64_t maskRows = maskElems / rowLength;
        const uint64_t bytes = (maskRows * t->rowStride * dtypeSize + 31) / 32 * 32;
        t->bcastRows[j] = maskRows;
        t->residentRows[j] = 0;
        if (t->groupRows != 0) {  // a core's slice
            t->residentRows[j] = coreRows;
            residentBytes += (coreRows * t->rowStride * dtypeSize + 31) / 32 * 32;
        } else if (maskRows < coreRows && residentBytes + bytes <= ubBytes / Shape::residentShare) {
            t->residentRows[j] = maskRows;
            residentBytes += bytes;
        }
    }
    // Double-buffered where a tile of one row fits so, else inputs only, else single; masks leave the UB
    // only if none fits.
    uint64_t tileRows = 0;
    uint32_t option = 0;
    for (int keep = 1; keep >= 0 && tileRows == 0; --keep) {
        if (keep == 0) {
            if (residentBytes == 0) break;
            for (int j = 0; j < nb; ++j) t->residentRows[j] = 0;
            residentBytes = 0;
        }
        for (option = Shape::firstOption; option < kBufferings; ++option) {
            const uint64_t perRow = rowBytes(kInOptions[option], kOutOptions[option]);
            tileRows = ubBytes > fixed + residentBytes ? (ubBytes - fixed - residentBytes) / perRow : 0;
            if (tileRows != 0) break;
        }
    }
    if (tileRows > kMaxTileRows) tileRows = kMaxTileRows;
    if (tileRows > coreRows) tileRows = coreRows;
    if (tileRows >= 1) {
        t->inBuffers = kInOptions[option];
        t->outBuffers = kOutOptions[option];
        t->rowRegs = static_cast<uint32_t>(rowRegs);
        t->tileRows = tileRows;
        t->foldRows = foldBytes != 0 ? tileRows : 0;
        t->chunkLength = 0;
        t->tileStride = (tileRows * t->rowStride + 63) / 64 * 64;
        t->vecStride = vecRow;
    } else {
        // Split mode: one row at a time in chunks of 64-element multiples; masks stream.
        for (int j = 0; j < nb; ++j) t->residentRows[j] = 0;
        residentBytes = 0;
        t->inBuffers = Shape::bufferNum;
        t->outBuffers = Shape::bufferNum;
        t->rowRegs = static_cast<uint32_t>(splitRegs);
        // The weights stay in UB in their I/O type when they fit half of it, else stream per chunk.
        const uint64_t weightBytes = Shape::vecIn * ((t->rowStride * dtypeSize + 31) / 32 * 32);
        t->weightsResident = Shape::vecIn != 0 && weightBytes <= ubBytes / kWeightShare ? 1 : 0;
        const uint64_t perElem = Shape::bufferNum * Shape::io * dtypeSize + 4ull * splitRegs + 4ull * Shape::vec +
                                 (t->weightsResident != 0 ? 0 : Shape::bufferNum * Shape::vecIn * dtypeSize) +
                                 4ull * 2 / 64 + 1;  // + the scratch's share
        const uint64_t splitFixed = 1024 + 4ull * 128 * Shape::statSlots +
                                    Shape::bufferNum * kStatSlot * Shape::statOut * dtypeSize +
                                    32ull * (2 * (Shape::io + Shape::statOut) + 4 + Shape::vecIn) + 3 * edge +
                                    (t->weightsResident != 0 ? weightBytes : 0);
        if (ubBytes <= splitFixed) return 2;
        uint64_t chunk = (ubBytes - splitFixed) / perElem / 64 * 64;
        if (chunk < 64) return 2;
        // A ragged row end is stored as a 32-byte window inside the row's last chunk: keep it that long.
        const auto shortEnd = [&](uint64_t c) { return rowLength % c != 0 && rowLength % c < alignElems; };
        while (edge != 0 && chunk > 64 && shortEnd(chunk)) chunk -= 64;
        if (edge != 0 && shortEnd(chunk)) return 3;
        t->tileRows = 1;
        t->foldRows = 0;
        t->chunkLength = chunk;
        t->tileStride = chunk;
        t->vecStride = chunk;
    }
    // Stat registers: whole groups of 8 slots (Brcb fills the slots of 8 rows per repeat).
    t->statStride = (t->tileRows * kStatSlot + 127) / 128 * 128;
    const uint64_t cols = t->chunkLength != 0 ? t->chunkLength : t->rowLength;
    // ReduceMax/ReduceMin write a value-index pair per 256-byte repeat (ReduceSum on 310P one value).
    t->reduceTmp = (2 * ((cols + 63) / 64) + 7) / 8 * 8;
    return 0;
}

}  // namespace asc_onnx

