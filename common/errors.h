// defines: first_line, error_text — what an error says, for a table cell, a log line or rungs.json.
#pragma once
#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace gpt2 {

inline std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

// An exception's text; ATen's (c10::Error) without the C++ backtrace it carries.
inline std::string error_text(const std::exception& e) {
  const auto* c = dynamic_cast<const c10::Error*>(&e);
  return c ? c->what_without_backtrace() : e.what();
}

}  // namespace gpt2
