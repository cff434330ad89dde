#include "bench/ladder/slow_window.h"

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace gpt2 {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double positive(const std::string& text, const std::string& whole) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(v > 0))
    throw std::runtime_error("GPT2BENCH_FAULT_SLOW='" + whole + "': expected <rung>:<seconds>[:<factor>], each number > 0");
  return v;
}
}  // namespace

SlowWindow::SlowWindow() {
  const char* v = std::getenv("GPT2BENCH_FAULT_SLOW");
  if (!v) return;
  const std::string s = v;
  const auto a = s.find(':'), b = a == std::string::npos ? a : s.find(':', a + 1);
  if (a == std::string::npos || a == 0) positive("", s);
  rung_ = s.substr(0, a);
  seconds_ = positive(s.substr(a + 1, b == std::string::npos ? b : b - a - 1), s);
  if (b != std::string::npos) factor_ = positive(s.substr(b + 1), s);
  if (factor_ < 1) throw std::runtime_error("GPT2BENCH_FAULT_SLOW='" + s + "': a factor below 1 would speed steps up");
}

void SlowWindow::open(const std::string& rung) {
  if (!rung_.empty() && rung == rung_ && opened_ < 0) opened_ = now_s();
}

at::Tensor SlowWindow::step(TrainStep& s) {
  const double t0 = now_s();
  at::Tensor loss = s.step();
  const double t1 = now_s();
  if (opened_ >= 0 && t1 - opened_ < seconds_)
    std::this_thread::sleep_for(std::chrono::duration<double>((factor_ - 1) * (t1 - t0)));
  return loss;
}

SlowWindow& slow_window() {
  static SlowWindow window;
  return window;
}

}  // namespace gpt2
