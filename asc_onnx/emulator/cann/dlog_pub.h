// Stand-in for CANN's logging header (not public): the log levels host_log.h names.
#pragma once
#include <cstdint>
#define DLOG_DEBUG 0
#define DLOG_INFO 1
#define DLOG_WARN 2
#define DLOG_ERROR 3
#define ASCENDCKERNEL 0
#define DEBUG_LOG_MASK 0
