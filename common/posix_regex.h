// defines: PosixRegex — a POSIX extended regular expression (glibc's: no backtracking, no exponential time), as
//          the command-line filters take them (--rung, kernels' --only).
#pragma once
#include <regex.h>

#include <stdexcept>
#include <string>

namespace gpt2 {

class PosixRegex {
 public:
  // `option` names the flag in the error: "--rung 'x(' is not a valid regular expression (...)".
  PosixRegex(const std::string& pattern, const std::string& option) {
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
  regex_t re_;
};

}  // namespace gpt2
