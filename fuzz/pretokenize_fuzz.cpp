// Any bytes (UTF-8 or not) through GPT-2's pre-tokenizer: the pieces are non-empty and put back
// together give the input exactly.
#include <string>
#include <string_view>

#include "model/bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string joined;
  for (const auto& piece : gpt2::Gpt2Bpe::pretokenize(text)) {
    if (piece.empty()) __builtin_trap();
    joined += piece;
  }
  if (joined != text) __builtin_trap();
  return 0;
}
