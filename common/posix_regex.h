// defines: PosixRegex — a POSIX extended regular expression (glibc's: no backtracking, no exponential time), as
//          the command-line filters take them (--rung, kernels' --only); regex_expanded_size.
#pragma once
#include <regex.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpt2 {

// How many atoms `pattern` holds once each bounded repetition x{m,n} is written out as n copies of x, as glibc's
// regcomp does: its time and memory grow with this (about 10 KB an atom), not with the pattern's length. Saturates
// at `cap`.
inline double regex_expanded_size(const std::string& pattern, double cap) {
  struct Group {
    double size = 0, last = 0;  // atoms so far; the size of the last atom or group, which a {m,n} repeats
  };
  std::vector<Group> open(1);
  auto atom = [&](double n) { open.back().size += n, open.back().last = n; };
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ++i, atom(1);
    } else if (c == '[') {  // a bracket expression is one atom: skip to its closing ']'
      size_t j = i + 1;
      if (j < pattern.size() && pattern[j] == '^') ++j;
      if (j < pattern.size() && pattern[j] == ']') ++j;
      while (j < pattern.size() && pattern[j] != ']') {
        if (pattern[j] == '[' && j + 1 < pattern.size() && std::string(":.=").find(pattern[j + 1]) != std::string::npos)
          j = std::min(pattern.find(std::string{pattern[j + 1], ']'}, j + 2), pattern.size() - 1);
        ++j;
      }
      i = j, atom(1);
    } else if (c == '(') {
      open.emplace_back();
    } else if (c == ')' && open.size() > 1) {
      const double inner = std::max(open.back().size, 1.0);
      open.pop_back(), atom(inner);
    } else if (c == '{') {
      char* end = nullptr;
      const double m = std::strtod(pattern.c_str() + i + 1, &end);
      double n = m;
      if (*end == ',') n = end[1] == '}' ? m + 1 : std::strtod(end + 1, &end);
      Group& g = open.back();
      const double copies = std::clamp(n, 1.0, cap);
      g.size = std::min(g.size + g.last * (copies - 1), cap), g.last = std::min(g.last * copies, cap);
      i = std::min(pattern.find('}', i), pattern.size() - 1);
    } else if (c != '*' && c != '+' && c != '?' && c != '|' && c != '^' && c != '$') {
      atom(1);
    }
  }
  double total = 0;
  for (const Group& g : open) total += g.size;
  return std::min(total, cap);
}

class PosixRegex {
 public:
  // `option` names the flag in the error: "--rung 'x(' is not a valid regular expression (...)".
  PosixRegex(const std::string& pattern, const std::string& option) {
    if (regex_expanded_size(pattern, kMaxExpanded + 1) > kMaxExpanded)
      throw std::invalid_argument(option + " '" + pattern + "' is refused: its bounded repetitions ({m,n}) write "
                                  "it out to more than 2,000 atoms, which costs the matcher tens of MB or more; "
                                  "use fewer or smaller ones, or * and +");
    if (const int rc = ::regcomp(&re_, pattern.c_str(), REG_EXTENDED | REG_NOSUB)) {
      char why[256];
      ::regerror(rc, &re_, why, sizeof(why));
      throw std::invalid_argument(option + " '" + pattern + "' is not a valid regular expression (" + why + ")");
    }
  }
  ~PosixRegex() { ::regfree(&re_); }
  PosixRegex(const PosixRegex&) = delete;
  PosixRegex& operator=(const PosixRegex&) = delete;
  bool found_in(const std::string& s) const { return ::regexec(&re_, s.c_str(), 0, nullptr, 0) == 0; }

 private:
  static constexpr double kMaxExpanded = 2000;  // about 20 MB and 10 ms to compile (docs/reliability.md)
  regex_t re_;
};

}  // namespace gpt2
