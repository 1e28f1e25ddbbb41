#include "tools/tests/cli_run.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace stepsim::cli_test {
namespace {


std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string quote(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

RunResult run_stepsim(const std::vector<std::string>& args) {
  char out_path[] = "/tmp/stepsim-cli-out-XXXXXX";
  char err_path[] = "/tmp/stepsim-cli-err-XXXXXX";
  close(mkstemp(out_path));
  close(mkstemp(err_path));
  std::string command = quote(STEPSIM_BINARY);
  // Appended piece by piece: GCC 12 misreports `" " + std::string` temporaries (-Wrestrict).
  for (const std::string& a : args) command.append(" ").append(quote(a));
  command.append(" >").append(out_path).append(" 2>").append(err_path).append(" </dev/null");
  const int status = std::system(command.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  unlink(out_path);
  unlink(err_path);
  return r;
}

}  // namespace stepsim::cli_test

