#include "bench/ladder/paired.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace gpt2 {

namespace {
void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Whether `child` has ended, without reaping it (the caller's waitpid reads its status).
bool ended(pid_t child) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == child;
}

// `what` written whole to `fd`, with SIGPIPE ignored meanwhile: a script that has ended must not end gpt2bench.
bool say(int fd, const std::string& what) {
  if (fd < 0) return false;
  struct sigaction ignore {}, old {};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &old);
  const bool whole = ::write(fd, what.data(), what.size()) == static_cast<ssize_t>(what.size());
  ::sigaction(SIGPIPE, &old, nullptr);
  return whole;
}
}  // namespace

PairPipes::PairPipes() {
  if (::pipe(asks_) != 0 || ::pipe(answers_) != 0)
    throw std::runtime_error(std::string("paired timing: pipe() failed: ") + std::strerror(errno));
}

PairPipes::~PairPipes() {
  for (int* fd : {&asks_[0], &asks_[1], &answers_[0], &answers_[1]}) close_fd(*fd);
}

void PairPipes::in_child() { close_fd(asks_[1]), close_fd(answers_[0]); }
void PairPipes::in_parent() { close_fd(asks_[0]), close_fd(answers_[1]); }

std::optional<std::string> PairPipes::line(pid_t child) {
  for (;;) {
    if (const auto nl = pending_.find('\n'); nl != std::string::npos) {
      std::string out = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      return out;
    }
    if (answers_[0] < 0) return std::nullopt;
    // A compile worker the script started may hold its end open after it died: its end is seen, not only EOF.
    pollfd p{answers_[0], POLLIN, 0};
    const int n = ::poll(&p, 1, 1000);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {
      if (ended(child)) return std::nullopt;
      continue;
    }
    char buf[256];
    const ssize_t got = ::read(answers_[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return std::nullopt;
    pending_.append(buf, static_cast<size_t>(got));
  }
}

bool PairPipes::ready(pid_t child) { return line(child) == "ready"; }

double PairPipes::repetition(pid_t child) {
  const std::optional<std::string> said = say(asks_[1], "rep\n") ? line(child) : std::nullopt;
  char* end = nullptr;
  const double s = said ? std::strtod(said->c_str(), &end) : 0;
  if (!said || end == said->c_str() || !(s > 0))
    throw std::runtime_error("paired timing: the reference " + (said ? "answered '" + *said + "'" : std::string("ended")) +
                             " when asked for a repetition");
  return s;
}

void PairPipes::end() {
  (void)say(asks_[1], "end\n");
  close_fd(asks_[1]);
}

}  // namespace gpt2
