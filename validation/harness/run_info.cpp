#include "validation/harness/run_info.hpp"

#include <cctype>
#include <cstdio>

#include <unistd.h>

namespace stepsim::harness {
namespace {

std::string format_utc(std::time_t when, const char* format) {
  std::tm parts{};
  gmtime_r(&when, &parts);
  char text[32];
  std::strftime(text, sizeof text, format, &parts);
  return text;
}

}  // namespace

std::string utc_date(std::time_t when) { return format_utc(when, "%Y-%m-%d"); }

std::string utc_time(std::time_t when) { return format_utc(when, "%H:%M:%SZ"); }

std::string shell_join(const std::vector<std::string>& words) {
  std::string line;
  for (const std::string& word : words) {
    bool safe = !word.empty();
    for (char c : word)
      safe = safe && (std::isalnum(static_cast<unsigned char>(c)) || std::string("_-./=,:+@%").find(c) != std::string::npos);
    std::string quoted = "'";
    for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    quoted += "'";
    line += (line.empty() ? "" : " ") + (safe ? word : quoted);
  }
  return line;
}

bool output_folder_writable(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  return access(folder.c_str(), W_OK | X_OK) == 0;
}

std::string format_cuda_version(int code) {
  return std::to_string(code / 1000) + "." + std::to_string((code % 1000) / 10);
}

std::string format_nccl_version(int code) {
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? (code % 10000) / 100 : (code % 1000) / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(code % 100);
}

std::string parse_driver_version(const std::string& proc_text) {
  // First line, e.g. "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 ..." or
  // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build ...": the
  // version is the first word made of digits and dots with at least one dot.
  if (proc_text.compare(0, 13, "NVRM version:") != 0) return "";
  const std::string line = proc_text.substr(0, proc_text.find('\n'));
  std::size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && std::isspace(static_cast<unsigned char>(line[at]))) ++at;
    std::size_t end = at;
    while (end < line.size() && !std::isspace(static_cast<unsigned char>(line[end]))) ++end;
    const std::string word = line.substr(at, end - at);
    bool version = word.find('.') != std::string::npos && std::isdigit(static_cast<unsigned char>(word[0]));
    for (char c : word) version = version && (std::isdigit(static_cast<unsigned char>(c)) || c == '.');
    if (version) return word;
    at = end;
  }
  return "";
}

}  // namespace stepsim::harness
