#pragma once
/// @file Host-side facts for a measurement file's `source` and `system` sections: the UTC date,
/// the command line, and version numbers as the libraries report them.
#include <ctime>
#include <string>
#include <vector>

namespace stepsim::harness {

/// @brief "YYYY-MM-DD" of `when` in UTC.
std::string utc_date(std::time_t when);
/// @brief "HH:MM:SSZ" of `when` in UTC.
std::string utc_time(std::time_t when);

/// @brief The words joined by spaces, each single-quoted for a POSIX shell when it needs it, so
/// the recorded command can be pasted back into a shell.
std::string shell_join(const std::vector<std::string>& words);

/// @brief Whether the folder that would hold `path` exists and is writable (checked before a long
/// run, so a typo in --out does not lose it).
bool output_folder_writable(const std::string& path);

/// @brief cudaRuntimeGetVersion / cudaDriverGetVersion code -> "13.0" (1000*major + 10*minor).
std::string format_cuda_version(int code);
/// @brief ncclGetVersion code -> "2.27.7" (10000*major + 100*minor + patch since NCCL 2.9,
/// 1000*major + 100*minor + patch before).
std::string format_nccl_version(int code);
/// @brief The NVIDIA kernel driver version ("580.95.05") from the text of
/// /proc/driver/nvidia/version, or "" when it is not there.
std::string parse_driver_version(const std::string& proc_text);

}  // namespace stepsim::harness
