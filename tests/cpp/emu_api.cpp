// Emulator API checks: each scenario prints JSON of its results; tests/test_emulator.py compares with numpy.
#include <iostream>
#include <vector>

#include "kernel_operator.h"

using namespace AscendC;

static std::vector<float> kA = {-3.5f, -1.0f, -0.25f, 0.0f, 0.5f, 1.0f, 2.0f, 7.25f};
static std::vector<float> kB = {2.0f, -4.0f, 0.5f, 3.0f, -0.5f, 1.0f, 8.0f, -2.0f};

static void Print(const char* name, const LocalTensor<float>& t, uint32_t n) {
    std::cout << "\"" << name << "\": [";
    for (uint32_t i = 0; i < n; ++i) std::cout << (i ? ", " : "") << t.GetValue(i);
    std::cout << "]";
}

int main() {
    asc_emu::St().soc = asc_emu::Soc{};
    TPipe pipe;
    TBuf<TPosition::VECCALC> buf;
    pipe.InitBuffer(buf, 64 * 32);
    LocalTensor<float> all = buf.Get<float>();
    LocalTensor<float> a = all[0], b = all[64], d = all[128];
    for (uint32_t i = 0; i < 8; ++i) a.SetValue(i, kA[i]), b.SetValue(i, kB[i]);
    std::cout.precision(9);
    std::cout << "{";
#define BIN(OP) OP(d, a, b, 8); Print(#OP, d, 8); std::cout << ", ";
    BIN(Add) BIN(Sub) BIN(Mul) BIN(Div) BIN(Max) BIN(Min)
#define SCAL(OP) OP(d, a, 1.5f, 8); Print(#OP, d, 8); std::cout << ", ";
    SCAL(Adds) SCAL(Muls) SCAL(Maxs) SCAL(Mins)
    LeakyRelu(d, a, 0.1f, 8); Print("LeakyRelu", d, 8); std::cout << ", ";
    for (uint32_t i = 0; i < 8; ++i) b.SetValue(i, std::fabs(kB[i]) + 0.25f);
#define UN(OP, SRC) OP(d, SRC, 8); Print(#OP, d, 8); std::cout << ", ";
    UN(Exp, a) UN(Ln, b) UN(Abs, a) UN(Sqrt, b) UN(Rsqrt, b) UN(Reciprocal, b) UN(Relu, a)
    Duplicate(d, 0.75f, 8); Print("Duplicate", d, 8); std::cout << ", ";
    // in-place (full alias) is allowed
    Muls(a, a, 2.0f, 8); Print("InPlace", a, 8); std::cout << ", ";
    // fp16 round trip through Cast
    TBuf<TPosition::VECCALC> hbuf;
    pipe.InitBuffer(hbuf, 64);
    LocalTensor<half> h = hbuf.Get<half>();
    for (uint32_t i = 0; i < 8; ++i) a.SetValue(i, 1.0f + i * 0.0001f);
    Cast(h, a, RoundMode::CAST_RINT, 8);
    Cast(d, h, RoundMode::CAST_NONE, 8); Print("CastHalf", d, 8); std::cout << ", ";
    // bf16 round to nearest even
    TBuf<TPosition::VECCALC> bbuf;
    pipe.InitBuffer(bbuf, 64);
    LocalTensor<bfloat16_t> bf = bbuf.Get<bfloat16_t>();
    for (uint32_t i = 0; i < 8; ++i) a.SetValue(i, kA[i] * 1.00390625f + 0.001f);
    Cast(bf, a, RoundMode::CAST_RINT, 8);
    Cast(d, bf, RoundMode::CAST_NONE, 8); Print("CastBf16", d, 8); std::cout << ", ";
    // half arithmetic rounds each result to half
    TBuf<TPosition::VECCALC> h2buf;
    pipe.InitBuffer(h2buf, 64);
    LocalTensor<half> h2 = h2buf.Get<half>();
    Duplicate(h, static_cast<half>(1.0f), 16);
    Duplicate(h2, static_cast<half>(0.0001f), 16);
    Add(h, h, h2, 16);
    Cast(d, h, RoundMode::CAST_NONE, 8); Print("HalfAdd", d, 8); std::cout << ", ";
    // float -> int32 per round mode (in place, on the register's bytes) and back: ties, saturation, NaN -> 0
    {
        const float ties[8] = {-2.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3e9f, -3e9f, std::nanf("")};
        LocalTensor<int32_t> asInt = d.ReinterpretCast<int32_t>();
#define TO_INT(MODE)                                                        \
        for (uint32_t i = 0; i < 8; ++i) d.SetValue(i, ties[i]);            \
        Cast(asInt, d, RoundMode::CAST_##MODE, 8);                          \
        Cast(d, asInt, RoundMode::CAST_NONE, 8);                            \
        Print("CastInt" #MODE, d, 8); std::cout << ", ";
        TO_INT(RINT) TO_INT(FLOOR) TO_INT(CEIL) TO_INT(ROUND) TO_INT(TRUNC)
    }
    // Compare / Compares / Select: masks of whole 256-byte repeats (64 floats)
    {
        TBuf<TPosition::VECCALC> cbuf;
        pipe.InitBuffer(cbuf, 4 * 64 * 4);
        LocalTensor<float> x = cbuf.Get<float>(), y = x[64], z = x[128], m = x[192];
        for (uint32_t i = 0; i < 64; ++i) x.SetValue(i, static_cast<float>(i % 7) - 3.0f), y.SetValue(i, 0.5f);
        Compares(m.ReinterpretCast<uint8_t>(), x, 0.0f, CMPMODE::LT, 64);
        Duplicate(z, 100.0f, 64);
        Select(d, m.ReinterpretCast<uint8_t>(), x, z, SELMODE::VSEL_TENSOR_TENSOR_MODE, 8);
        Print("SelectLtZero", d, 8); std::cout << ", ";
        Compare(m.ReinterpretCast<uint8_t>(), x, y, CMPMODE::GE, 64);
        Select(d, m.ReinterpretCast<uint8_t>(), x, z, SELMODE::VSEL_TENSOR_TENSOR_MODE, 8);
        Print("SelectGeHalf", d, 8); std::cout << ", ";
        // 8 floats = 32 bytes: no whole 256-byte repeat, so nothing is computed and the old mask stays
        Compares(m.ReinterpretCast<uint8_t>(), x, 100.0f, CMPMODE::GT, 8);
        Select(d, m.ReinterpretCast<uint8_t>(), x, z, SELMODE::VSEL_TENSOR_TENSOR_MODE, 8);
        Print("ComparePartialRepeat", d, 8); std::cout << ", ";
    }
    // GM <-> UB copies: DataCopy rounds down to 32 bytes, DataCopyPad is byte exact and pads
    std::vector<float> gmIn(20), gmOut(20, -1.0f);
    for (int i = 0; i < 20; ++i) gmIn[i] = static_cast<float>(i);
    asc_emu::St().gm.push_back({"in", reinterpret_cast<uint8_t*>(gmIn.data()), 80, false, {}});
    asc_emu::St().gm.push_back({"out", reinterpret_cast<uint8_t*>(gmOut.data()), 80, true, std::vector<int32_t>(80, -1)});
    GlobalTensor<float> gi, go;
    gi.SetGlobalBuffer(gmIn.data(), 20);
    go.SetGlobalBuffer(gmOut.data(), 20);
    Duplicate(d, -7.0f, 32);
    SetFlag<HardEvent::V_MTE2>(0);  // the copy overwrites what the vector unit wrote
    WaitFlag<HardEvent::V_MTE2>(0);
    DataCopy(d, gi, 11);  // 44 bytes -> 32 copied
    Print("DataCopyRoundsDown", d, 12); std::cout << ", ";
    Duplicate(d, -7.0f, 32);
    SetFlag<HardEvent::V_MTE2>(0);
    WaitFlag<HardEvent::V_MTE2>(0);
    DataCopyPad(d, gi[3], DataCopyExtParams{1, 5 * 4, 0, 0, 0}, DataCopyPadExtParams<float>{true, 0, 2, 9.0f});
    Print("DataCopyPadIn", d, 10); std::cout << ", ";
    // no padding: the row's 32-byte tail is the block's first element, isPad or not (DataCopyPad.md, dummy fill)
    DataCopyPad(d, gi[3], DataCopyExtParams{1, 5 * 4, 0, 0, 0}, DataCopyPadExtParams<float>{false, 0, 0, 9.0f});
    Print("DataCopyPadDummy", d, 8); std::cout << ", ";
    SetFlag<HardEvent::MTE2_MTE3>(0);
    WaitFlag<HardEvent::MTE2_MTE3>(0);
    DataCopyPad(go[1], d, DataCopyExtParams{1, 3 * 4, 0, 0, 0});
    std::cout << "\"DataCopyPadOut\": [";
    for (int i = 0; i < 6; ++i) std::cout << (i ? ", " : "") << gmOut[i];
    std::cout << "], \"gm_read\": " << asc_emu::St().gmReadBytes << ", \"gm_write\": " << asc_emu::St().gmWriteBytes;
    std::cout << ", \"vec_add\": " << asc_emu::St().vecInstr["Add"] << "}" << std::endl;
    return 0;
}
