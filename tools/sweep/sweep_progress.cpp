#include "tools/sweep/sweep_progress.hpp"

#include <fmt/format.h>

#include <string>

namespace stepsim::sweep {
namespace {

std::string clock(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60) : fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

void ProgressBar::update(int done, bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (first_done_ < 0) first_done_ = done;
  if (!force && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? (done - first_done_) / elapsed : 0;
  constexpr int kWidth = 30;
  const int filled = total_ > 0 ? kWidth * done / total_ : kWidth;
  const std::string eta = rate > 0 ? clock((total_ - done) / rate) : "?";
  std::fputs(fmt::format("\r[{}{}] {}/{} points  {:.0f}/s  ETA {}  \x1b[K", std::string(filled, '#'),
                         std::string(kWidth - filled, '.'), done, total_, rate, eta)
                 .c_str(),
             stderr);
  std::fflush(stderr);
}

void ProgressBar::finish(int done) {
  if (!enabled_) return;
  update(done, true);
  std::fputs("\n", stderr);
}

}  // namespace stepsim::sweep
