// defines: Gpt2Bpe — GPT-2's byte-level BPE tokenizer from the user's encoder.json + vocab.bpe
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace gpt2 {

class Gpt2Bpe {
 public:
  Gpt2Bpe(const std::string& encoder_json, const std::string& vocab_bpe);  // DataError on bad files
  std::vector<int> encode(std::string_view text) const;

  // GPT-2's pre-tokenizer ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+).
  // ASCII is classified exactly; every non-ASCII code point counts as a letter, an approximation
  // of \p{L} that differs from OpenAI's regex only on non-ASCII digits and punctuation.
  static std::vector<std::string> pretokenize(std::string_view text);

 private:
  std::vector<int> bpe(const std::string& word) const;  // word already mapped to byte-unicode
  std::unordered_map<std::string, int> encoder_;
  std::map<std::pair<std::string, std::string>, int> ranks_;
  std::string byte_unicode_[256];  // GPT-2's bytes_to_unicode, as UTF-8
};

}  // namespace gpt2
