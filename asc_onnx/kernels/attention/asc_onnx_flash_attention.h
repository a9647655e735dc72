// asc-onnx: flash attention on 910B's mixed cores (shipped into op_kernel/ with each attention op). Per work
// item (one Q block of one head, or one part of its keys) and KV block the cube computes the scores into this
// core's workspace, the vector core keeps each row's running max and sum (online softmax, fp32) and writes P, the
// cube computes P @ v, and the vector core rescales and accumulates the rows' output in fp32, writing y once.
// What varies by op is its tiling struct and its Traits (the op's kernel defines both).
// No include guard: each kernel includes it once, and the emulator's batch programs compile several kernels
// in one unit, each kernel's copy inside a namespace of its own.

namespace asc_onnx {
constexpr int32_t BUFFER_NUM = 2;
constexpr float LOWEST = -3.4028235e+38f;  // a running max starts here: a row masked to -inf so far keeps exp() at 0

// fp32 values into the I/O type.
template <typename T>
__aicore__ inline void ToOutput(const AscendC::LocalTensor<T>& dst, const AscendC::LocalTensor<float>& src,
                                uint32_t count)
{
    if constexpr (std::is_same_v<T, float>) {
        AscendC::Adds(dst, src, 0.0f, count);
    } else if constexpr (std::is_same_v<T, half>) {
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_NONE, count);
    } else {
        AscendC::Cast(dst, src, AscendC::RoundMode::CAST_RINT, count);
    }
}

// row[0, cols) -= (or *=) the value filling the 32-byte block `stat` (a row's statistic, by Brcb): repeats of 64
// reading the block at stride 0, then the tail.
template <bool isMul>
__aicore__ inline void RowByStat(const AscendC::LocalTensor<float>& row, const AscendC::LocalTensor<float>& stat,
                                 uint32_t cols)
{
    const uint32_t full = cols / 64u;
    const uint32_t tail = cols % 64u;
    if (full > 0) {
        if constexpr (isMul) {
            AscendC::Mul(row, row, stat, 64, static_cast<uint8_t>(full), {1, 1, 0, 8, 8, 0});
        } else {
            AscendC::Sub(row, row, stat, 64, static_cast<uint8_t>(full), {1, 1, 0, 8, 8, 0});
        }
    }
    if (tail > 0) {
        if constexpr (isMul) {
            AscendC::Mul(row[full * 64u], row[full * 64u], stat, tail, 1, {1, 1, 0, 8, 8, 0});
        } else {
            AscendC::Sub(row[full * 64u], row[full * 64u], stat, tail, 1, {1, 1, 0, 8, 8, 0});
        }
    }
}

// rows x cols at `pitch` floats (a multiple of 8) op= each row's statistic block (stat[r * 8]): one instruction per
// 64 columns over every row where that is fewer (rows at pitch / 8 blocks apart, stat a block apart), else per row.
template <bool isMul>
__aicore__ inline void RowsByStat(const AscendC::LocalTensor<float>& tile, const AscendC::LocalTensor<float>& stat,
                                  uint32_t rows, uint32_t cols, uint32_t pitch)
{
    const uint32_t groups = (cols + 63u) / 64u;
    if (groups < rows && pitch / 8u <= 255u) {
        const uint8_t rowBlocks = static_cast<uint8_t>(pitch / 8u);
        const AscendC::BinaryRepeatParams params{1, 1, 0, rowBlocks, rowBlocks, 1};
        for (uint32_t g = 0; g < groups; ++g) {
            const uint32_t width = cols - g * 64u < 64u ? cols - g * 64u : 64u;
            if constexpr (isMul) {
                AscendC::Mul(tile[g * 64u], tile[g * 64u], stat, width, static_cast<uint8_t>(rows), params);
            } else {
                AscendC::Sub(tile[g * 64u], tile[g * 64u], stat, width, static_cast<uint8_t>(rows), params);
            }
        }
    } else {
        for (uint32_t r = 0; r < rows; ++r) {
            RowByStat<isMul>(tile[r * pitch], stat[r * 8u], cols);
        }
    }
}

// rows x cols of scores (`pitch` floats apart) *= (isMul) or += a mask's rows (one for all where
// broadcast along the queries); `wide` holds a mask row widened to fp32, once where broadcast.
template <bool isMul, typename T>
__aicore__ inline void RowsByMask(const AscendC::LocalTensor<float>& scores, const AscendC::LocalTensor<T>& maskRows,
                                  const AscendC::LocalTensor<float>& wide, uint32_t rows, uint32_t cols, uint32_t pitch,
                                  bool broadcast)
{
    for (uint32_t r = 0; r < rows; ++r) {
        const AscendC::LocalTensor<float>& row = scores[r * pitch];
        if constexpr (std::is_same_v<T, float>) {
            if constexpr (isMul) {
                AscendC::Mul(row, row, maskRows[broadcast ? 0u : r * pitch], cols);
            } else {
                AscendC::Add(row, row, maskRows[broadcast ? 0u : r * pitch], cols);
            }
        } else {
            if (r == 0 || !broadcast) {
                AscendC::Cast(wide, maskRows[broadcast ? 0u : r * pitch], AscendC::RoundMode::CAST_NONE, cols);
            }
            if constexpr (isMul) {
                AscendC::Mul(row, row, wide, cols);
            } else {
                AscendC::Add(row, row, wide, cols);
            }
        }
    }
}

// The kernel of one attention op. Traits (the op's kernel defines them):
//   hasMask   an additive mask over the scores (input `mask`, broadcast along its leading dims and the queries)
//   hasKeep   a keep mask of the mask's shape multiplies the scores first (input `keep`: Where on the scores)
//   transK    k is [.., Sk, D] (the cube transposes it); else k^T [.., D, Sk] is given
//   kvTiled   query head h reads KV head h mod Hkv (a Tile of the heads); else h / group (repeat_kv)
//   hasScale  the scores are multiplied by Scale(td) first
//   causal    the mask is the causal triangle (a query at row p of sq sees keys up to p + sk - sq), generated here:
//             no mask is read, and a Q block's KV blocks end at its last row's last visible key
template <typename T, typename TilingData, typename Traits>
class FlashAttention {
    using QType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;
    using KType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T, Traits::transK>;
    using FType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, float>;
    using VType = AscendC::MatmulType<AscendC::TPosition::GM, CubeFormat::ND, T>;

public:
    __aicore__ inline FlashAttention() {}
    // keep and mask: nullptr where the op has none.
    __aicore__ inline void Init(GM_ADDR q, GM_ADDR k, GM_ADDR v, GM_ADDR keep, GM_ADDR mask, GM_ADDR y,
                                GM_ADDR workspace, const TilingData& tiling)
    {
        td = tiling;
        qGm.SetGlobalBuffer((__gm__ T*)q);
        kGm.SetGlobalBuffer((__gm__ T*)k);
        vGm.SetGlobalBuffer((__gm__ T*)v);
        if constexpr (Traits::hasMask) {
            maskGm.SetGlobalBuffer((__gm__ T*)mask);
        }
        if constexpr (Traits::hasKeep) {
            keepGm.SetGlobalBuffer((__gm__ T*)keep);
        }
        yGm.SetGlobalBuffer((__gm__ T*)y);
        // This vector core's part of the user workspace: two stages of scores (fp32), of P, of P @ v (fp32).
        GM_ADDR mine = AscendC::GetUserWorkspace(workspace) + AscendC::GetBlockIdx() * td.wsCoreBytes;
        scoresGm.SetGlobalBuffer((__gm__ float*)mine, 2u * td.scoreStage);
        probsGm.SetGlobalBuffer((__gm__ T*)(mine + 2u * td.scoreStage * sizeof(float)), 2u * td.scoreStage);
        outGm.SetGlobalBuffer((__gm__ float*)(mine + 2u * td.scoreStage * (sizeof(float) + sizeof(T))),
                              2u * td.outStage);
        if (td.splits > 1) {
            // After every core's ring: each unit's rows of output (unnormalized), then their max and their sum.
            GM_ADDR parts = AscendC::GetUserWorkspace(workspace) + td.cores * td.wsCoreBytes;
            const uint64_t rows = static_cast<uint64_t>(td.units) * td.mBlock;
            partOutGm.SetGlobalBuffer((__gm__ float*)parts, rows * td.dv);
            partMaxGm.SetGlobalBuffer((__gm__ float*)(parts + rows * td.dv * sizeof(float)), rows);
            partSumGm.SetGlobalBuffer((__gm__ float*)(parts + rows * (td.dv + 1u) * sizeof(float)), rows);
        }
    }

    // After REGIST_MATMUL_OBJ (the kernel entry): the pipe's buffers.
    __aicore__ inline void InitBuffers()
    {
        pipe.InitBuffer(inQueueScores, BUFFER_NUM, td.chunkRows * td.rowPitch * sizeof(float));
        pipe.InitBuffer(outQueueProbs, BUFFER_NUM, td.chunkRows * td.rowPitch * sizeof(T));
        if constexpr (Traits::hasMask) {
            pipe.InitBuffer(inQueueMask, BUFFER_NUM, td.chunkRows * td.rowPitch * sizeof(T));
            pipe.InitBuffer(maskBuf, td.rowPitch * sizeof(float));
        }
        if constexpr (Traits::hasKeep) {
            pipe.InitBuffer(inQueueKeep, BUFFER_NUM, td.chunkRows * td.rowPitch * sizeof(T));
        }
        pipe.InitBuffer(inQueueOut, BUFFER_NUM, td.outRows * td.dv * sizeof(float));
        pipe.InitBuffer(outQueueY, BUFFER_NUM, td.outRows * td.dv * sizeof(T));
        pipe.InitBuffer(accBuf, td.mBlock * td.dv * sizeof(float));
        // + Brcb's reach past the last line (and the causal mask's eight 8 x 8 tiles and a LOWEST block)
        pipe.InitBuffer(stateBuf, (6u * td.mBlock + 8u + (Traits::causal ? 520u : 0u)) * sizeof(float));
        if constexpr (Traits::causal) {
            AscendC::LocalTensor<float> tiles = CausalTiles();
            for (uint32_t i = 0; i < 520u; ++i) {  // tile o, row, key: LOWEST where key - row >= o
                const int32_t o = static_cast<int32_t>(i / 64u);
                const int32_t row = static_cast<int32_t>(i / 8u % 8u);
                const int32_t key = static_cast<int32_t>(i % 8u);
                tiles.SetValue(i, i >= 512u || key - row >= o ? LOWEST : 0.0f);
            }
            AscendC::TEventID written = GetTPipePtr()->FetchEventID(AscendC::HardEvent::S_V);
            AscendC::SetFlag<AscendC::HardEvent::S_V>(written);
            AscendC::WaitFlag<AscendC::HardEvent::S_V>(written);
        }
        // partials, the tails' blocks, two lines of row statistics, their blocks (score or output rows)
        const uint32_t spread = td.chunkRows > td.outRows ? Rows8() : (td.outRows + 7u) / 8u * 8u;
        pipe.InitBuffer(statBuf, (td.chunkRows * td.partials + Rows8() * 10u + spread * 8u) * sizeof(float));
        if (td.splits > 1) {
            pipe.InitBuffer(outQueuePart, 1, td.outRows * td.dv * sizeof(float));
        }
    }

    // Steps (unit, KV block) in turn, two stages of each buffer: the cube computes step s + 1's scores and step
    // s - 1's P @ v while this core takes the softmax of step s; it then folds step s - 1's P @ v into its rows.
    // Split keys: every core then waits for all (SyncAll) and combines the parts of its items.
    __aicore__ inline void Process()
    {
#if __NPU_ARCH__ == 2002
        // 310P: not built. Its Matmul has no asynchronous IterateAll to wait for, and its tiling refuses every shape.
#else
        const uint32_t core = static_cast<uint32_t>(AscendC::GetBlockIdx());
        uint32_t count = core < td.units ? (td.units - core + td.cores - 1) / td.cores : 0;
        if constexpr (Traits::causal) {
            if (td.causal) {  // dealt in a snake (ItemAt): the last, partial round goes the other way on odd rounds
                const uint32_t rounds = td.units / td.cores;
                const uint32_t rest = td.units % td.cores;
                count = rounds + (rest > 0 && (rounds % 2 == 0 ? core < rest : core >= td.cores - rest) ? 1u : 0u);
            }
        }
        Step cur{0, 0, 0};
        Step prev{0, 0, 0};
        if (count > 0) {
            if constexpr (!Traits::transK) {
                // k^T's rows are Sk keys apart, the scores' rows kvBlock apart (the cube keeps it)
                mmQk.SetOrgShape(static_cast<int>(td.mBlock), static_cast<int>(td.sk), static_cast<int>(td.d),
                                 static_cast<int>(td.d), static_cast<int>(td.kvBlock));
            }
            if (td.dv != td.dvOut) {
                // P @ v's rows dv apart in the workspace (v's head dim padded): dvOut columns each
                mmPv.SetOrgShape(static_cast<int>(td.mBlock), static_cast<int>(td.dvOut), static_cast<int>(td.kvBlock),
                                 static_cast<int>(td.kvBlock), static_cast<int>(td.dv));
            }
            QueueScores(cur);
        }
        while (cur.j < count) {
            if (cur.s > 0) {
                Release();  // step s - 1's reads of its scores and step s - 2's of its P @ v are done
            }
            const Step next = Next(cur);
            if (next.j < count) {
                QueueScores(next);
            }
            mmQk.WaitIterateAll();  // the scores of step s
            Softmax(cur);
            // (the message waits for this core's MTE3 writes of P: PostMessage's PipeBarrier<PIPE_MTE3>)
            QueueProduct(cur);
            if (cur.s > 0) {
                mmPv.WaitIterateAll();  // step s - 1's P @ v (it has read the P stage step s + 1 writes)
                Accumulate(prev);
            }
            prev = cur;
            cur = next;
        }
        if (count > 0) {  // the last step's P @ v; an idle core has nothing to wait for or end
            mmPv.WaitIterateAll();
            Accumulate(prev);
            mmQk.End();
            mmPv.End();
        }
        if (td.splits > 1) {
            AscendC::SyncAll();  // every part's rows and statistics are in global memory
            Combine();
        }
#endif
    }

    // Public for the kernel entry, which registers the Matmul objects in its own scope.
    AscendC::TPipe pipe;
    AscendC::Matmul<QType, KType, FType, FType> mmQk;
    AscendC::Matmul<QType, VType, FType, FType> mmPv;
    TilingData td;

private:
    // A unit: one part of the keys of one item (the whole of them unless split).
    struct Item {
        uint32_t batch;
        uint32_t head;     // within the batch (folded: the KV head whose query heads the item takes)
        uint64_t kvHead0;  // the KV head's index over every batch (group query heads share one)
        uint64_t qOffset;  // the block's first query row over every head
        uint32_t q0;       // ... within its head (folded: within the group)
        uint32_t rows;
        uint32_t unit;     // over every core
        uint32_t c0;       // the part's first key
        uint32_t keys;     // ... and its keys
        uint32_t blocks;   // ... in KV blocks
    };

    // One step: this core's j-th unit, its b-th KV block, the s-th step of this core (stage s % 2).
    struct Step {
        uint32_t j;
        uint32_t b;
        uint32_t s;
    };

    __aicore__ inline Item UnitAt(uint32_t u) const
    {
        const uint32_t i = u / td.splits;
        const uint32_t part = u % td.splits;
        const uint64_t head0 = i / td.qBlocks;  // a head, or (folded) a KV head's group of query heads
        const uint32_t q0 = i % td.qBlocks * td.mBlock;
        const uint32_t rows = td.headRows - q0 < td.mBlock ? td.headRows - q0 : td.mBlock;
        const uint32_t batch = static_cast<uint32_t>(head0 / td.itemHeads);
        const uint32_t head = static_cast<uint32_t>(head0 % td.itemHeads);
        const uint32_t kvHead = Traits::kvTiled ? head % td.kvHeads : head / td.group;
        const uint64_t kvHead0 = td.foldHeads ? head0 : static_cast<uint64_t>(batch) * td.kvHeads + kvHead;
        const uint32_t c0 = part * td.partKeys;
        uint32_t keys = td.sk - c0 < td.partKeys ? td.sk - c0 : td.partKeys;
        if constexpr (Traits::causal) {
            if (td.causal) {  // (one part) the block's last row sees keys up to q0 + rows - 1 + sk - sq
                const uint32_t seen = q0 + rows + (td.sk - td.headRows);
                keys = seen < keys ? seen : keys;
            }
        }
        return {batch, head, kvHead0, head0 * td.headRows + q0, q0, rows, u, c0, keys,
                (keys + td.kvBlock - 1) / td.kvBlock};
    }

    // This core's j-th unit. Causal: a later Q block sees more keys, so the items go out by falling Q block (every
    // head's last blocks first), dealt to the cores in a snake: round j forward when even, backward when odd, and
    // each core's rounds add up to about the same keys.
    __aicore__ inline Item ItemAt(uint32_t j) const
    {
        const uint32_t core = static_cast<uint32_t>(AscendC::GetBlockIdx());
        if constexpr (Traits::causal) {
            if (td.causal) {  // (one part an item)
                const uint32_t at = j * td.cores + (j % 2u == 0u ? core : td.cores - 1u - core);
                const uint32_t heads = td.items / td.qBlocks;
                return UnitAt(at % heads * td.qBlocks + (td.qBlocks - 1u - at / heads));
            }
        }
        return UnitAt(core + j * td.cores);
    }

    __aicore__ inline Step Next(const Step& t) const
    {
        const bool last = t.b + 1 == ItemAt(t.j).blocks;
        return {last ? t.j + 1 : t.j, last ? 0u : t.b + 1, t.s + 1};
    }

    // Keys of the unit's KV block b: from c0, cols of them.
    __aicore__ inline uint32_t KeysAt(const Item& it, uint32_t b, uint32_t& c0) const
    {
        c0 = it.c0 + b * td.kvBlock;
        return it.c0 + it.keys - c0 < td.kvBlock ? it.c0 + it.keys - c0 : td.kvBlock;
    }

    // Step t's scores onto the cube, into stage s % 2 (rows of kvBlock floats).
    __aicore__ inline void QueueScores(const Step& t)
    {
        const Item it = ItemAt(t.j);
        uint32_t c0 = 0;
        const uint32_t cols = KeysAt(it, t.b, c0);
        mmQk.SetTensorA(qGm[it.qOffset * td.d]);
        // k [.., Sk, D]: a KV block is rows c0.. of it; k^T [.., D, Sk]: its columns c0.., rows Sk apart
        const uint64_t kAt = it.kvHead0 * td.sk * td.d + (Traits::transK ? static_cast<uint64_t>(c0) * td.d : c0);
        mmQk.SetTensorB(kGm[kAt], Traits::transK);
        mmQk.SetTail(static_cast<int>(it.rows), static_cast<int>(cols), static_cast<int>(td.d));
        mmQk.template IterateAll<false>(scoresGm[(t.s % 2) * td.scoreStage], 0, false, true);  // signals when done
    }

    // Step t's P @ v onto the cube, into stage s % 2 of the outputs (fp32 rows of dv).
    __aicore__ inline void QueueProduct(const Step& t)
    {
        const Item it = ItemAt(t.j);
        uint32_t c0 = 0;
        const uint32_t cols = KeysAt(it, t.b, c0);
        mmPv.SetTensorA(probsGm[(t.s % 2) * td.scoreStage]);
        mmPv.SetTensorB(vGm[(it.kvHead0 * td.sk + c0) * td.dvOut], false);
        mmPv.SetTail(static_cast<int>(it.rows), static_cast<int>(td.dvOut), static_cast<int>(cols));
        mmPv.template IterateAll<false>(outGm[(t.s % 2) * td.outStage], 0, false, true);
    }

    // This core's MTE2 reads of its workspace are done: the cube's next write to them is invisible to the
    // compiler's auto-sync.
    __aicore__ inline void Release()
    {
        AscendC::TEventID readDone = GetTPipePtr()->FetchEventID(AscendC::HardEvent::MTE2_S);
        AscendC::SetFlag<AscendC::HardEvent::MTE2_S>(readDone);
        AscendC::WaitFlag<AscendC::HardEvent::MTE2_S>(readDone);
    }

    // Step t: the online softmax of its score rows, chunk by chunk, P into stage s % 2.
    __aicore__ inline void Softmax(const Step& t)
    {
        const Item it = ItemAt(t.j);
        uint32_t c0 = 0;
        const uint32_t cols = KeysAt(it, t.b, c0);
        uint32_t r0 = 0;
        uint32_t rows = it.rows < td.chunkRows ? it.rows : td.chunkRows;
        CopyIn(t.s, it, c0, cols, r0, rows);
        while (rows > 0) {
            // The next chunk's loads go out before this one's softmax (the queues hold two).
            const uint32_t next = r0 + rows;
            const uint32_t nextRows = it.rows - next < td.chunkRows ? it.rows - next : td.chunkRows;
            if (nextRows > 0) {
                CopyIn(t.s, it, c0, cols, next, nextRows);
            }
            Compute(t, it, cols, r0, rows);
            CopyOut(t.s, cols, r0, rows);
            r0 = next;
            rows = nextRows;
        }
    }

    // Rows [r0, r0 + rows) of step s's scores (and their mask) into UB: rows of a 16-multiple pitch.
    __aicore__ inline void CopyIn(uint32_t s, const Item& it, uint32_t c0, uint32_t cols, uint32_t r0, uint32_t rows)
    {
        const uint32_t pitch = (cols + 15u) / 16u * 16u;
        AscendC::LocalTensor<float> scoresLocal = inQueueScores.AllocTensor<float>();
        const uint32_t rowBytes = cols * static_cast<uint32_t>(sizeof(float));
        const uint32_t gap = (pitch * static_cast<uint32_t>(sizeof(float)) - (rowBytes + 31u) / 32u * 32u) / 32u;
        AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), rowBytes,
            (td.kvBlock - cols) * static_cast<uint32_t>(sizeof(float)), gap, 0};
        AscendC::DataCopyPadExtParams<float> pad{false, 0, 0, 0.0f};
        AscendC::DataCopyPad(scoresLocal, scoresGm[(s % 2) * td.scoreStage + static_cast<uint64_t>(r0) * td.kvBlock],
                             params, pad);
        inQueueScores.EnQue(scoresLocal);
        if constexpr (Traits::hasMask) {
            // The rows' mask over this block's keys. Broadcast along the queries: one row for every chunk of the
            // block, read with its first chunk and held until its last (Compute).
            if (td.maskRowStride == 0 && r0 > 0) {
                return;
            }
            const uint64_t maskBase = static_cast<uint64_t>(it.batch) * td.maskBatchStride +
                                      static_cast<uint64_t>(it.head) * td.maskHeadStride;
            AscendC::LocalTensor<T> maskIn = inQueueMask.AllocTensor<T>();
            AscendC::DataCopyPadExtParams<T> maskPad{false, 0, 0, static_cast<T>(0)};
            const uint32_t maskRows = td.maskRowStride == 0 ? 1u : rows;
            const uint32_t maskBytes = cols * static_cast<uint32_t>(sizeof(T));
            const uint32_t maskGap = static_cast<uint32_t>((td.maskRowStride == 0 ? cols : td.maskRowStride) - cols) *
                                     static_cast<uint32_t>(sizeof(T));
            AscendC::DataCopyExtParams maskParams{static_cast<uint16_t>(maskRows), maskBytes, maskGap,
                (pitch * static_cast<uint32_t>(sizeof(T)) - (maskBytes + 31u) / 32u * 32u) / 32u, 0};
            const uint64_t at = maskBase + static_cast<uint64_t>(it.q0 + r0) * td.maskRowStride + c0;
            AscendC::DataCopyPad(maskIn, maskGm[at], maskParams, maskPad);
            inQueueMask.EnQue(maskIn);
            if constexpr (Traits::hasKeep) {  // the keep mask has the additive mask's shape: the same rows
                AscendC::LocalTensor<T> keepIn = inQueueKeep.AllocTensor<T>();
                AscendC::DataCopyPad(keepIn, keepGm[at], maskParams, maskPad);
                inQueueKeep.EnQue(keepIn);
            }
        }
    }

    // Each row's max (isMax) or sum of its first cols values into Stats() (one float a row, in a line): 64 keys a
    // repeat into partials, the partials of every row by one more ReduceRepeat; a tail under 64 keys by a repeat of
    // its own per row. Nothing waits on the scalar unit.
    template <bool isMax>
    __aicore__ inline void RowStats(const AscendC::LocalTensor<float>& scoresLocal, uint32_t rows, uint32_t cols,
                                    uint32_t pitch)
    {
        constexpr auto kind = isMax ? AscendC::ReduceType::MAX : AscendC::ReduceType::SUM;
        constexpr auto order = AscendC::ReduceOrder::ORDER_ONLY_VALUE;
        AscendC::LocalTensor<float> partial = statBuf.Get<float>();  // td.partials per row, or full in a line
        AscendC::LocalTensor<float> tails = partial[td.chunkRows * td.partials];  // a row's tail: one block a row
        AscendC::LocalTensor<float> stat = Stats();
        AscendC::LocalTensor<float> tailStat = stat[Rows8()];
        const uint32_t full = cols / 64u;
        const uint32_t tail = cols % 64u;
        if (full > 0) {
            uint32_t spacing = td.partials;  // partials from one row to the next
            if (tail == 0 && full % 8u == 0 && pitch == cols) {
                // The rows' partials in a line, in as few instructions as 255 repeats allow.
                spacing = full;
                const uint32_t perCall = 255u / full;
                for (uint32_t r = 0; r < rows; r += perCall) {
                    const uint32_t n = rows - r < perCall ? rows - r : perCall;
                    AscendC::ReduceRepeat<kind>(partial[r * full], scoresLocal[r * pitch], 64,
                                                static_cast<int32_t>(n * full), 1, 1, 8, order);
                }
            } else {
                for (uint32_t r = 0; r < rows; ++r) {
                    AscendC::ReduceRepeat<kind>(partial[r * td.partials], scoresLocal[r * pitch], 64,
                                                static_cast<int32_t>(full), 1, 1, 8, order);
                }
            }
            AscendC::ReduceRepeat<kind>(stat, partial, static_cast<int32_t>(full), static_cast<int32_t>(rows), 1, 1,
                                        static_cast<int32_t>(spacing / 8u), order);
        }
        if (tail > 0) {
            for (uint32_t r = 0; r < rows; ++r) {
                AscendC::ReduceRepeat<kind>(tails[r * 8u], scoresLocal[r * pitch + full * 64u],
                                            static_cast<int32_t>(tail), 1, 1, 1, 8, order);
            }
            // one result a block into a line; beside the full repeats' results, combined
            const AscendC::LocalTensor<float>& dst = full > 0 ? tailStat : stat;
            AscendC::ReduceRepeat<kind>(dst, tails, 1, static_cast<int32_t>(rows), 1, 1, 1, order);
            if (full > 0) {
                if constexpr (isMax) {
                    AscendC::Max(stat, stat, tailStat, rows);
                } else {
                    AscendC::Add(stat, stat, tailStat, rows);
                }
            }
        }
    }

    __aicore__ inline uint32_t Rows8() const { return (td.chunkRows + 7u) / 8u * 8u; }

    // The causal mask's tiles (after the state's lines and Brcb's reach): for a row group's first masked key at
    // offset o of its 32-byte block, tile o holds LOWEST where key x of the block is past row i's last (x - i >= o),
    // else 0 (8 x 8 floats each); then a block of LOWEST.
    __aicore__ inline AscendC::LocalTensor<float> CausalTiles() { return stateBuf.Get<float>()[6u * td.mBlock + 8u]; }

    // Keys after their query to LOWEST (the causal mask): row r of `rows` (`pitch` floats apart) is the query at
    // position p0 + r of sq, which sees keys up to p0 + r + sk - sq; this block's `cols` keys start at c0. No vector
    // operand starts mid-block, so rows go in groups whose first masked key lies in one 32-byte block: that block
    // of each row gets its tile added (one instruction for the group), the keys after it LOWEST (a Min with the
    // LOWEST block over the group's rows for each 64 keys, or a Duplicate a row, whichever is fewer). Rows that see
    // none of the block are filled in one Duplicate.
    __aicore__ inline void MaskAfterQueries(const AscendC::LocalTensor<float>& scoresLocal, uint32_t p0, uint32_t c0,
                                            uint32_t rows, uint32_t cols, uint32_t pitch)
    {
        AscendC::LocalTensor<float> tiles = CausalTiles();
        AscendC::LocalTensor<float> lowest = tiles[512];
        const int64_t first = static_cast<int64_t>(p0) + td.sk - td.headRows - c0;  // row 0's last visible key
        uint32_t r = first < -1 ? static_cast<uint32_t>(-1 - first) : 0u;  // rows before r see none of the block
        r = r < rows ? r : rows;
        if (r > 0) {
            AscendC::Duplicate(scoresLocal, LOWEST, static_cast<int32_t>(r * pitch));
        }
        // A group's rows are one repeat each, pitch / 8 blocks apart (a uint8 stride): past 255, one row a call.
        const bool strided = pitch / 8u <= 255u;
        const uint8_t rowBlocks = static_cast<uint8_t>(strided ? pitch / 8u : 0u);
        while (r < rows) {
            const int64_t last = first + r;
            if (last + 1 >= static_cast<int64_t>(cols)) {
                break;  // this row and the later ones see the whole block
            }
            const uint32_t from = static_cast<uint32_t>(last + 1);
            const uint32_t block = from / 8u * 8u;
            const uint32_t offset = from - block;
            uint32_t group = 8u - offset < rows - r ? 8u - offset : rows - r;
            group = strided ? group : 1u;
            const uint32_t width = cols - block < 8u ? cols - block : 8u;
            AscendC::Add(scoresLocal[r * pitch + block], scoresLocal[r * pitch + block], tiles[offset * 64u], width,
                         static_cast<uint8_t>(group), {1, 1, 1, rowBlocks, rowBlocks, 1});
            const uint32_t after = block + 8u;
            if (after < cols) {
                const uint32_t runs = (cols - after + 63u) / 64u;
                if (runs < group) {
                    for (uint32_t c = after; c < cols; c += 64u) {
                        const uint32_t n = cols - c < 64u ? cols - c : 64u;
                        AscendC::Min(scoresLocal[r * pitch + c], scoresLocal[r * pitch + c], lowest, n,
                                     static_cast<uint8_t>(group), {1, 1, 0, rowBlocks, rowBlocks, 0});
                    }
                } else {
                    for (uint32_t i = 0; i < group; ++i) {
                        AscendC::Duplicate(scoresLocal[(r + i) * pitch + after], LOWEST,
                                           static_cast<int32_t>(cols - after));
                    }
                }
            }
            r += group;
        }
    }

    // A chunk's row statistics in a line (after the partials and the tails' blocks).
    __aicore__ inline AscendC::LocalTensor<float> Stats()
    {
        return statBuf.Get<float>()[td.chunkRows * td.partials + Rows8() * 8u];
    }

    // Each row's statistic filling a 32-byte block (Brcb), for the per-row forms of Sub and Mul.
    __aicore__ inline AscendC::LocalTensor<float> Spread(const AscendC::LocalTensor<float>& line, uint32_t rows)
    {
        AscendC::LocalTensor<float> blocks = Stats()[2u * Rows8()];
        AscendC::Brcb(blocks, line, static_cast<uint8_t>((rows + 7u) / 8u), {1, 8});
        return blocks;
    }

    // Scale, mask and the online softmax of rows [r0, r0 + rows) of step t in fp32, in place; P in the I/O type.
    __aicore__ inline void Compute(const Step& t, const Item& it, uint32_t cols, uint32_t r0, uint32_t rows)
    {
        const uint32_t b = t.b;
        const uint32_t s = t.s;
        const uint32_t j = t.j;
        const uint32_t pitch = (cols + 15u) / 16u * 16u;
        const bool whole = pitch == cols;  // the rows lie end to end: one instruction for the chunk
        AscendC::LocalTensor<float> scoresLocal = inQueueScores.DeQue<float>();
        // A mask broadcast along the queries: its row came with the block's first chunk and is freed after its last.
        const bool firstChunk = r0 == 0;
        const bool lastChunk = r0 + rows == it.rows;
        const bool heldRow = td.maskRowStride == 0;
        AscendC::LocalTensor<float> maskF;
        if constexpr (Traits::hasMask) {
            if (!heldRow || firstChunk) {
                maskLocal = inQueueMask.DeQue<T>();
            }
            maskF = maskBuf.Get<float>();
        }
        if constexpr (Traits::hasKeep) {
            if (!heldRow || firstChunk) {
                keepLocal = inQueueKeep.DeQue<T>();
            }
        }
        AscendC::LocalTensor<T> probsLocal = outQueueProbs.AllocTensor<T>();
        // The rows' running max and sum, the rescale of steps s % 2 and 1 / sum of items j % 2: a float a row.
        AscendC::LocalTensor<float> state = stateBuf.Get<float>();
        AscendC::LocalTensor<float> rowMax = state[r0];
        AscendC::LocalTensor<float> rowSum = state[td.mBlock + r0];
        AscendC::LocalTensor<float> rescale = state[(2u + s % 2u) * td.mBlock + r0];
        AscendC::LocalTensor<float> invSum = state[(4u + j % 2u) * td.mBlock + r0];
        AscendC::LocalTensor<float> stat = Stats();
        if constexpr (Traits::hasScale) {
            const float scale = Traits::Scale(td);
            if (whole) {
                AscendC::Muls(scoresLocal, scoresLocal, scale, rows * cols);
            } else {
                for (uint32_t r = 0; r < rows; ++r) {
                    AscendC::Muls(scoresLocal[r * pitch], scoresLocal[r * pitch], scale, cols);
                }
            }
        }
        if constexpr (Traits::causal) {
            if (td.causal) {
                uint32_t c0 = 0;
                KeysAt(it, b, c0);
                MaskAfterQueries(scoresLocal, it.q0 + r0, c0, rows, cols, pitch);
            }
        }
        if constexpr (Traits::hasMask) {
            if constexpr (Traits::hasKeep) {
                // x keep (1 or 0: Where(mask, scores, fill) is scores x keep + mask)
                RowsByMask<true>(scoresLocal, keepLocal, maskF, rows, cols, pitch, td.maskRowStride == 0);
            }
            // + mask
            RowsByMask<false>(scoresLocal, maskLocal, maskF, rows, cols, pitch, td.maskRowStride == 0);
        }
        // The new running max; exp(old - new) rescales the sum and output so far.
        RowStats<true>(scoresLocal, rows, cols, pitch);
        if (b == 0) {
            AscendC::Maxs(stat, stat, LOWEST, rows);
        } else {
            AscendC::Max(stat, stat, rowMax, rows);
            AscendC::Sub(rescale, rowMax, stat, rows);
            AscendC::Exp(rescale, rescale, rows);
        }
        AscendC::Adds(rowMax, stat, 0.0f, rows);
        RowsByStat<false>(scoresLocal, Spread(stat, rows), rows, cols, pitch);
        if (whole) {
            AscendC::Exp(scoresLocal, scoresLocal, rows * cols);
        } else {
            for (uint32_t r = 0; r < rows; ++r) {
                AscendC::Exp(scoresLocal[r * pitch], scoresLocal[r * pitch], cols);
            }
        }
        RowStats<false>(scoresLocal, rows, cols, pitch);
        if (b == 0) {
            AscendC::Adds(rowSum, stat, 0.0f, rows);
        } else {
            AscendC::Mul(rowSum, rowSum, rescale, rows);
            AscendC::Add(rowSum, rowSum, stat, rows);
        }
        if (b + 1 == it.blocks && td.splits > 1) {
            StoreStats(it, r0, rows, rowMax, rowSum);  // the part's row max and sum, for the combine
        } else if (b + 1 == it.blocks) {
            // 1 / sum by Div (float Reciprocal is documented as short of 1e-4 relative): a row masked to -inf
            // everywhere has a sum of 0, so y = 0 x (1 / 0 = inf) = NaN, as onnxruntime computes it.
            AscendC::LocalTensor<float> ones = stat[Rows8()];
            AscendC::Duplicate(ones, 1.0f, rows);
            AscendC::Div(invSum, ones, rowSum, rows);
        }
        if (whole) {
            ToOutput(probsLocal, scoresLocal, rows * cols);
        } else {
            for (uint32_t r = 0; r < rows; ++r) {
                ToOutput(probsLocal[r * pitch], scoresLocal[r * pitch], cols);
            }
        }
        outQueueProbs.EnQue(probsLocal);
        if constexpr (Traits::hasMask) {
            if (!heldRow || lastChunk) {
                inQueueMask.FreeTensor(maskLocal);
            }
        }
        if constexpr (Traits::hasKeep) {
            if (!heldRow || lastChunk) {
                inQueueKeep.FreeTensor(keepLocal);
            }
        }
        inQueueScores.FreeTensor(scoresLocal);
    }

    // P's rows into stage s % 2 (rows of kvBlock elements: the A operand of P @ v).
    __aicore__ inline void CopyOut(uint32_t s, uint32_t cols, uint32_t r0, uint32_t rows)
    {
        const uint32_t pitch = (cols + 15u) / 16u * 16u;
        AscendC::LocalTensor<T> probsLocal = outQueueProbs.DeQue<T>();
        const uint32_t rowBytes = cols * static_cast<uint32_t>(sizeof(T));
        const uint32_t gap = (pitch * static_cast<uint32_t>(sizeof(T)) - (rowBytes + 31u) / 32u * 32u) / 32u;
        AscendC::DataCopyExtParams params{static_cast<uint16_t>(rows), rowBytes, gap,
            (td.kvBlock - cols) * static_cast<uint32_t>(sizeof(T)), 0};
        AscendC::DataCopyPad(probsGm[(s % 2) * td.scoreStage + static_cast<uint64_t>(r0) * td.kvBlock], probsLocal,
                             params);
        if (rowBytes % 32u != 0) {
            // The next chunk's first row may share this one's last 32-byte block in global memory.
            AscendC::PipeBarrier<PIPE_MTE3>();
        }
        outQueueProbs.FreeTensor(probsLocal);
    }

    // Step t's P @ v into the rows' fp32 output: acc = acc x rescale + o (the first block: acc = o); after the last
    // block, y = acc / sum, written once (split: acc into the part's rows). The next rows' load goes out before this
    // rows' work (the queue holds two).
    __aicore__ inline void Accumulate(const Step& t)
    {
        const Item it = ItemAt(t.j);
        uint32_t r0 = 0;
        uint32_t rows = it.rows < td.outRows ? it.rows : td.outRows;
        LoadOut(t.s, r0, rows);
        while (rows > 0) {
            const uint32_t next = r0 + rows;
            const uint32_t nextRows = it.rows - next < td.outRows ? it.rows - next : td.outRows;
            if (nextRows > 0) {
                LoadOut(t.s, next, nextRows);
            }
            Fold(t, it, r0, rows);
            r0 = next;
            rows = nextRows;
        }
    }

    // Rows [r0, r0 + rows) of step s's P @ v into UB.
    __aicore__ inline void LoadOut(uint32_t s, uint32_t r0, uint32_t rows)
    {
        LoadRows(outGm[(s % 2) * td.outStage + static_cast<uint64_t>(r0) * td.dv], rows);
    }

    // `rows` fp32 rows of dv from global memory into UB.
    __aicore__ inline void LoadRows(const AscendC::GlobalTensor<float>& src, uint32_t rows)
    {
        AscendC::LocalTensor<float> rowsLocal = inQueueOut.AllocTensor<float>();
        AscendC::DataCopy(rowsLocal, src, rows * td.dv);
        inQueueOut.EnQue(rowsLocal);
    }

    __aicore__ inline void Fold(const Step& t, const Item& it, uint32_t r0, uint32_t rows)
    {
        const uint32_t b = t.b;
        const uint32_t s = t.s;
        const uint32_t j = t.j;
        const bool last = b + 1 == it.blocks;
        const uint32_t count = rows * td.dv;
        AscendC::LocalTensor<float> state = stateBuf.Get<float>();
        AscendC::LocalTensor<float> rowsAcc = accBuf.Get<float>()[r0 * td.dv];
        AscendC::LocalTensor<float> outLocal = inQueueOut.DeQue<float>();
        if (b > 0) {
            RowsByStat<true>(rowsAcc, Spread(state[(2u + s % 2u) * td.mBlock + r0], rows), rows, td.dv, td.dv);
            AscendC::Add(rowsAcc, rowsAcc, outLocal, count);
        } else if (!last) {
            AscendC::Adds(rowsAcc, outLocal, 0.0f, count);
        }
        if (last && td.splits > 1) {
            StorePart(it, r0, rows, b > 0 ? rowsAcc : outLocal);
        } else if (last) {
            // (a single block divides its product in place)
            StoreY(it, r0, rows, b > 0 ? rowsAcc : outLocal, state[(4u + j % 2u) * td.mBlock + r0]);
        }
        inQueueOut.FreeTensor(outLocal);
    }

    // Rows [r0, r0 + rows) of a part's running max and sum into the workspace (lines of mBlock a unit).
    __aicore__ inline void StoreStats(const Item& it, uint32_t r0, uint32_t rows,
                                      const AscendC::LocalTensor<float>& rowMax,
                                      const AscendC::LocalTensor<float>& rowSum)
    {
        const uint32_t rows8 = (rows + 7u) / 8u * 8u;
        AscendC::LocalTensor<float> statsLocal = outQueuePart.AllocTensor<float>();
        AscendC::Adds(statsLocal, rowMax, 0.0f, rows);
        AscendC::Adds(statsLocal[rows8], rowSum, 0.0f, rows);
        outQueuePart.EnQue(statsLocal);
        statsLocal = outQueuePart.DeQue<float>();
        const uint64_t at = static_cast<uint64_t>(it.unit) * td.mBlock + r0;
        AscendC::DataCopyExtParams params{1, rows * static_cast<uint32_t>(sizeof(float)), 0, 0, 0};
        AscendC::DataCopyPad(partMaxGm[at], statsLocal, params);
        AscendC::DataCopyPad(partSumGm[at], statsLocal[rows8], params);
        outQueuePart.FreeTensor(statsLocal);
    }

    // Rows [r0, r0 + rows) of a part's output, unnormalized, into the workspace.
    __aicore__ inline void StorePart(const Item& it, uint32_t r0, uint32_t rows,
                                     const AscendC::LocalTensor<float>& acc)
    {
        const uint32_t count = rows * td.dv;
        AscendC::LocalTensor<float> partLocal = outQueuePart.AllocTensor<float>();
        AscendC::Adds(partLocal, acc, 0.0f, count);
        outQueuePart.EnQue(partLocal);
        partLocal = outQueuePart.DeQue<float>();
        AscendC::DataCopy(partOutGm[(static_cast<uint64_t>(it.unit) * td.mBlock + r0) * td.dv], partLocal, count);
        outQueuePart.FreeTensor(partLocal);
    }

    // After SyncAll: the items of this core (in turn over the cores), their parts combined by their row maxima,
    // y = sum_p exp(max_p - max) o_p / sum_p exp(max_p - max) sum_p, written once.
    __aicore__ inline void Combine()
    {
        for (uint32_t i = static_cast<uint32_t>(AscendC::GetBlockIdx()); i < td.items; i += td.cores) {
            const Item it = UnitAt(i * td.splits);
            for (uint32_t r0 = 0; r0 < it.rows; r0 += td.outRows) {
                CombineRows(it, r0, it.rows - r0 < td.outRows ? it.rows - r0 : td.outRows);
            }
        }
    }

    // Rows [r0, r0 + rows) of part p's output into UB.
    __aicore__ inline void LoadPart(const Item& it, uint32_t p, uint32_t r0, uint32_t rows)
    {
        LoadRows(partOutGm[(static_cast<uint64_t>(it.unit + p) * td.mBlock + r0) * td.dv], rows);
    }

    __aicore__ inline void CombineRows(const Item& it, uint32_t r0, uint32_t rows)
    {
        const uint32_t parts = td.splits;
        const uint32_t rows8 = (rows + 7u) / 8u * 8u;
        const uint32_t count = rows * td.dv;
        // Every part's max of these rows in a line of rows8, then every part's sum.
        AscendC::LocalTensor<float> lse = inQueueScores.AllocTensor<float>();
        const uint32_t bytes = rows * static_cast<uint32_t>(sizeof(float));
        const uint32_t gap = (td.mBlock - rows) * static_cast<uint32_t>(sizeof(float));  // to the next part's line
        AscendC::DataCopyExtParams params{static_cast<uint16_t>(parts), bytes, gap,
            (rows8 * 4u - (bytes + 31u) / 32u * 32u) / 32u, 0};
        AscendC::DataCopyPadExtParams<float> pad{false, 0, 0, 0.0f};
        const uint64_t at = static_cast<uint64_t>(it.unit) * td.mBlock + r0;
        AscendC::DataCopyPad(lse, partMaxGm[at], params, pad);
        AscendC::DataCopyPad(lse[parts * rows8], partSumGm[at], params, pad);
        inQueueScores.EnQue(lse);
        lse = inQueueScores.DeQue<float>();
        LoadPart(it, 0, r0, rows);
        AscendC::LocalTensor<float> state = stateBuf.Get<float>();
        AscendC::LocalTensor<float> rowMax = state;
        AscendC::LocalTensor<float> rowSum = state[td.mBlock];
        AscendC::LocalTensor<float> invSum = state[2u * td.mBlock];
        AscendC::Adds(rowMax, lse, 0.0f, rows);
        for (uint32_t p = 1; p < parts; ++p) {
            AscendC::Max(rowMax, rowMax, lse[p * rows8], rows);
        }
        // a part's weight exp(max_p - max); the sum of its weighted sums
        for (uint32_t p = 0; p < parts; ++p) {
            AscendC::Sub(lse[p * rows8], lse[p * rows8], rowMax, rows);
            AscendC::Exp(lse[p * rows8], lse[p * rows8], rows);
            AscendC::Mul(lse[(parts + p) * rows8], lse[(parts + p) * rows8], lse[p * rows8], rows);
        }
        AscendC::Adds(rowSum, lse[parts * rows8], 0.0f, rows);
        for (uint32_t p = 1; p < parts; ++p) {
            AscendC::Add(rowSum, rowSum, lse[(parts + p) * rows8], rows);
        }
        // 1 / sum (Div, as above: a row masked everywhere gives 0 x inf = NaN, as onnxruntime computes it)
        AscendC::LocalTensor<float> ones = invSum[td.mBlock];
        AscendC::Duplicate(ones, 1.0f, rows);
        AscendC::Div(invSum, ones, rowSum, rows);
        AscendC::LocalTensor<float> acc = accBuf.Get<float>();
        for (uint32_t p = 0; p < parts; ++p) {
            if (p + 1 < parts) {
                LoadPart(it, p + 1, r0, rows);
            }
            AscendC::LocalTensor<float> partLocal = inQueueOut.DeQue<float>();
            RowsByStat<true>(partLocal, Spread(lse[p * rows8], rows), rows, td.dv, td.dv);
            if (p == 0) {
                AscendC::Adds(acc, partLocal, 0.0f, count);
            } else {
                AscendC::Add(acc, acc, partLocal, count);
            }
            inQueueOut.FreeTensor(partLocal);
        }
        inQueueScores.FreeTensor(lse);
        StoreY(it, r0, rows, acc, invSum);
    }

    // y rows [r0, r0 + rows) = the rows' fp32 output x 1 / sum (invSum: a float a row), written once.
    __aicore__ inline void StoreY(const Item& it, uint32_t r0, uint32_t rows, const AscendC::LocalTensor<float>& out,
                                  const AscendC::LocalTensor<float>& invSum)
    {
        const uint32_t count = rows * td.dv;
        RowsByStat<true>(out, Spread(invSum, rows), rows, td.dv, td.dv);
        AscendC::LocalTensor<T> yLocal = outQueueY.AllocTensor<T>();
        ToOutput(yLocal, out, count);
        outQueueY.EnQue(yLocal);
        yLocal = outQueueY.DeQue<T>();
        // y's rows are dvOut apart. The tile's rows are dv apart: one copy where they are the same; where the head
        // dim is padded, a row a block, the tile's gap past each row's 32-byte blocks skipped.
        const uint32_t size = static_cast<uint32_t>(sizeof(T));
        const bool padded = td.dv != td.dvOut;
        const uint32_t bytes = padded ? td.dvOut * size : count * size;
        const uint32_t gap = padded ? (td.dv * size - (bytes + 31u) / 32u * 32u) / 32u : 0u;
        AscendC::DataCopyExtParams params{static_cast<uint16_t>(padded ? rows : 1u), bytes, gap, 0, 0};
        AscendC::DataCopyPad(yGm[(it.qOffset + r0) * td.dvOut], yLocal, params);
        if (bytes % 32u != 0) {
            // The next rows' first bytes may share this write's last 32-byte block in global memory.
            AscendC::PipeBarrier<PIPE_MTE3>();
        }
        outQueueY.FreeTensor(yLocal);
    }

    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueScores;
    AscendC::TQue<AscendC::QuePosition::VECOUT, BUFFER_NUM> outQueueProbs;
    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueMask;  // (hasMask)
    AscendC::LocalTensor<T> maskLocal;  // the block's mask rows in UB (a broadcast row held across its chunks)
    AscendC::LocalTensor<T> keepLocal;  // ... the keep mask's
    AscendC::TBuf<AscendC::TPosition::VECCALC> maskBuf;  // one mask row widened to fp32
    AscendC::GlobalTensor<T> maskGm;
    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueKeep;  // (hasKeep)
    AscendC::GlobalTensor<T> keepGm;
    AscendC::TQue<AscendC::QuePosition::VECIN, BUFFER_NUM> inQueueOut;
    AscendC::TQue<AscendC::QuePosition::VECOUT, BUFFER_NUM> outQueueY;
    AscendC::TBuf<AscendC::TPosition::VECCALC> accBuf;     // the item's rows of output, fp32
    AscendC::TBuf<AscendC::TPosition::VECCALC> stateBuf;   // the rows' running max, sum, rescales and 1 / sum
    AscendC::TBuf<AscendC::TPosition::VECCALC> statBuf;    // a chunk's row statistics
    AscendC::GlobalTensor<T> qGm;
    AscendC::GlobalTensor<T> kGm;
    AscendC::GlobalTensor<T> vGm;
    AscendC::GlobalTensor<T> yGm;
    AscendC::GlobalTensor<float> scoresGm;  // this core's two stages of scores of one Q block and KV block
    AscendC::GlobalTensor<T> probsGm;       // ... of their exponentials (P, unnormalized)
    AscendC::GlobalTensor<float> outGm;     // ... of P @ v
    AscendC::TQue<AscendC::QuePosition::VECOUT, 1> outQueuePart;  // split keys: a part's rows and statistics out
    AscendC::GlobalTensor<float> partOutGm;  // every unit's rows of output (split keys)
    AscendC::GlobalTensor<float> partMaxGm;  // ... their max
    AscendC::GlobalTensor<float> partSumGm;  // ... their sum
};
}  // namespace asc_onnx
