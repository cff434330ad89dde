#include "bench/runtime/launcher.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <thread>

namespace gpt2 {
namespace {

std::vector<pid_t> g_children;
extern "C" void forward_signal(int sig) {
  for (pid_t p : g_children)
    if (p > 0) ::kill(p, sig);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error(std::string("--nproc: no free local port: ") + std::strerror(errno));
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "stopped";
}

}  // namespace

namespace {

// In the child: rank `r`'s environment as torchrun sets it, then this binary again with `args`. Never returns.
[[noreturn]] void exec_rank(int r, int nproc, int port, unsigned cores, const std::vector<std::string>& args) {
  ::setenv("RANK", std::to_string(r).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  // As torchrun: share the cores rather than oversubscribe them, unless told otherwise.
  ::setenv("OMP_NUM_THREADS", std::to_string(std::max(1u, cores / nproc)).c_str(), 0);
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv("/proc/self/exe", argv.data());
  std::perror("gpt2bench: exec");
  ::_exit(127);
}

}  // namespace

int launch_local(int nproc, const std::vector<std::string>& args, int grace_s) {
  if (nproc < 1) throw std::invalid_argument("--nproc must be at least 1");
  const int port = free_port();
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::cerr << "gpt2bench: launching " << nproc << " processes (MASTER_ADDR=127.0.0.1 MASTER_PORT=" << port << ")\n";
  g_children.assign(nproc, 0);
  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("--nproc: fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      exec_rank(r, nproc, port, cores, args);
    }
    g_children[r] = pid;
  }
  auto old_int = std::signal(SIGINT, forward_signal), old_term = std::signal(SIGTERM, forward_signal);

  int result = 0, running = nproc;
  std::chrono::steady_clock::time_point deadline{};
  bool terminated = false;
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, deadline == std::chrono::steady_clock::time_point{} ? 0 : WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    if (pid == 0) {  // a rank failed earlier: give the others their grace, then stop them
      if (std::chrono::steady_clock::now() > deadline) {
        forward_signal(terminated ? SIGKILL : SIGTERM);
        terminated = true;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    --running;
    int rank = 0;
    for (int r = 0; r < nproc; ++r)
      if (g_children[r] == pid) rank = r, g_children[r] = 0;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok) {
      std::cerr << "gpt2bench: rank " << rank << " " << describe(status) << "\n";
      if (result == 0) {
        result = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_s);
      }
    }
  }
  std::signal(SIGINT, old_int), std::signal(SIGTERM, old_term);
  return result;
}

}  // namespace gpt2
