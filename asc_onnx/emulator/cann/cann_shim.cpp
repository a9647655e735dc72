// Definitions CANN's open Matmul tiling sources link against, which live in libraries that are not
// public (logging, platform queries, TilingDef): quiet logging, no platform state. Our code.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "impl/adv_api/detail/host_log.h"
#include "register/tilingdata_base.h"
#include "securec.h"
#include "tiling/platform/platform_ascendc.h"

namespace AscendC {
namespace UnifiedLog {
// Quiet unless ASC_CANN_TILING_LOG is set (then CANN's own messages go to stderr: why a tiling failed).
static int32_t Never(int32_t, int32_t) { return std::getenv("ASC_CANN_TILING_LOG") != nullptr ? 1 : 0; }
static void Drop(int32_t, int32_t, const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stderr, fmt, ap);
    va_end(ap);
}
LoggingSingleton* LoggingSingleton::instance_ = nullptr;
LoggingSingleton::LoggingSingleton() : dLogHandle(nullptr), logHandle(nullptr), CheckLogLevel(Never), DlogRecord(Drop) {}
LoggingSingleton::~LoggingSingleton() {}
LoggingSingleton* LoggingSingleton::getInstance() {
    static LoggingSingleton quiet;
    return &quiet;
}
}  // namespace UnifiedLog
UnifiedLog::LoggingSingleton* logInstance = UnifiedLog::LoggingSingleton::getInstance();
}  // namespace AscendC

namespace optiling {
CTilingDataClassFactory& CTilingDataClassFactory::GetInstance() {
    static CTilingDataClassFactory f;
    return f;
}
void CTilingDataClassFactory::RegisterTilingData(const char*, std::shared_ptr<TilingDef> (*)()) {}
void TilingDef::CheckAlignAndGenPlaceHolder(const char*, size_t) {}
// The field storage the TILING_DATA_FIELD_DEF setters write into, and its copy out.
void TilingDef::InitData() {
    data_ptr_ = new uint8_t[data_size_ + 8]();
    inited_data_ptr = false;
}
void TilingDef::SaveToBuffer(void* buf, size_t cap) {
    std::memcpy(buf, data_ptr_, data_size_ < cap ? data_size_ : cap);
}
}  // namespace optiling

namespace platform_ascendc {
void PlatformAscendC::GetCoreMemSize(const CoreMemType&, uint64_t& size) const { size = 0; }
SocVersion PlatformAscendC::GetSocVersion() const { return SocVersion::ASCEND910B; }
}  // namespace platform_ascendc

// securec's bounded copies (the stub header declares them; the library is not public).
errno_t memcpy_s(void* dest, size_t destMax, const void* src, size_t count) {
    if (count > destMax) return 1;
    std::memmove(dest, src, count);
    return 0;
}
errno_t memset_s(void* dest, size_t destMax, int c, size_t count) {
    if (count > destMax) return 1;
    std::memset(dest, c, count);
    return 0;
}
