// defines: strf (printf-style formatting into a std::string: GCC 12's libstdc++ has no std::format), clip.
#pragma once
#include <cstdarg>
#include <cstdio>
#include <string>

namespace gpt2 {

[[gnu::format(printf, 1, 2)]] inline std::string strf(const char* fmt, ...) {
  va_list args, again;
  va_start(args, fmt);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, args);
  va_end(args);
  std::string s(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  std::vsnprintf(s.data(), s.size() + 1, fmt, again);
  va_end(again);
  return s;
}

// `s`, or where longer than `n` characters its first n - 3 and "...": a console line's or table cell's share.
inline std::string clip(const std::string& s, size_t n) { return s.size() > n ? s.substr(0, n - 3) + "..." : s; }

}  // namespace gpt2
