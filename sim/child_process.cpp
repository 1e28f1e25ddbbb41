#include "sim/child_process.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "platforms/config_error.hpp"

namespace stepsim::sim {
namespace {

void write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;   // the parent is gone; nothing left to tell
    done += static_cast<std::size_t>(n);
  }
}

std::string read_all(int fd) {
  std::string data;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buffer, static_cast<std::size_t>(n));
  }
  return data;
}

}  // namespace

std::string run_in_child(const std::function<std::string()>& work) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  // Buffered output would otherwise be printed by both processes.
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // A simulation killed with its parent (kill -9 of a sweep or of stepsim) stops too, instead
    // of running on at 100 % CPU under init.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(1);
    ::close(fds[0]);
    // First byte: 'R' result follows, 'C' a user-input error (where, NUL, the rest), 'E' an
    // error message.
    std::string message;
    try {
      message = work();
      message.insert(message.begin(), 'R');
    } catch (const ConfigError& e) {
      message.assign(1, 'C').append(e.where()).append(1, '\0').append(std::string(e.what()).substr(e.where().size() + 2));
    } catch (const std::exception& e) {
      message.assign(1, 'E').append(e.what());
    } catch (...) {
      message = "Eunknown exception";
    }
    write_all(fds[1], message);
    ::close(fds[1]);
    std::fflush(nullptr);
    ::_exit(0);   // no atexit handlers or static destructors of the parent's state
  }
  ::close(fds[1]);
  const std::string data = read_all(fds[0]);
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool clean_exit = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (clean_exit && !data.empty() && data[0] == 'R') return data.substr(1);
  if (clean_exit && !data.empty() && data[0] == 'E') throw std::runtime_error(data.substr(1));
  if (clean_exit && !data.empty() && data[0] == 'C') {
    const std::size_t end = data.find('\0');
    throw ConfigError(data.substr(1, end - 1), data.substr(end + 1), "");
  }
  if (WIFSIGNALED(status))
    throw std::runtime_error("simulation child process died with signal " + std::to_string(WTERMSIG(status)));
  throw std::runtime_error("simulation child process exited with status " +
                           std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                           " without a result");
}

}  // namespace stepsim::sim
