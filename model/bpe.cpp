#include "model/bpe.h"

#include <nlohmann/json.hpp>

#include <climits>
#include <fstream>
#include <sstream>

#include "model/shard.h"

namespace gpt2 {
namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Length of the UTF-8 sequence starting at byte c (1 for invalid bytes, so nothing is skipped).
size_t utf8_len(unsigned char c) {
  if (c >= 0xF0 && c < 0xF8) return 4;
  if (c >= 0xE0) return c < 0xF0 ? 3 : 1;
  if (c >= 0xC0) return 2;
  return 1;
}

enum class Cls { kLetter, kDigit, kSpace, kOther };
Cls classify(unsigned char c) {
  if (c >= 0x80 || std::isalpha(c)) return Cls::kLetter;
  if (std::isdigit(c)) return Cls::kDigit;
  if (std::isspace(c)) return Cls::kSpace;
  return Cls::kOther;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw DataError(path + ": cannot open");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

Gpt2Bpe::Gpt2Bpe(const std::string& encoder_json, const std::string& vocab_bpe) {
  // bytes_to_unicode: printable bytes map to themselves, the rest to 256+n, so no byte is whitespace.
  int n = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    byte_unicode_[b] = utf8(printable ? b : 256 + n++);
  }
  try {
    auto j = nlohmann::json::parse(read_file(encoder_json));
    if (!j.is_object()) throw DataError(encoder_json + ": expected a JSON object of token -> id");
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > 65535)
        throw DataError(encoder_json + ": token '" + it.key() + "' has an id that is not an integer in [0, 65535]");
      encoder_[it.key()] = it.value().get<int>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw DataError(encoder_json + ": not valid JSON (" + e.what() + ")");
  }
  std::istringstream merges(read_file(vocab_bpe));
  std::string line;
  int rank = 0, lineno = 0;
  while (std::getline(merges, line)) {
    ++lineno;
    if (line.empty() || line.starts_with("#version")) continue;
    const auto sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == line.size())
      throw DataError(vocab_bpe + ":" + std::to_string(lineno) + ": expected a merge 'left right'");
    ranks_[{line.substr(0, sp), line.substr(sp + 1)}] = rank++;
  }
}

std::vector<std::string> Gpt2Bpe::pretokenize(std::string_view t) {
  static const char* kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  std::vector<std::string> out;
  size_t i = 0;
  auto cls_at = [&](size_t k) { return classify(static_cast<unsigned char>(t[k])); };
  auto run = [&](size_t k, Cls c) {  // end of the run of class c starting at k
    while (k < t.size() && cls_at(k) == c) k += c == Cls::kLetter ? utf8_len(static_cast<unsigned char>(t[k])) : 1;
    return std::min(k, t.size());
  };
  while (i < t.size()) {
    bool matched = false;
    for (const char* c : kContractions)
      if (t.substr(i).starts_with(c)) {
        out.emplace_back(c);
        i += std::string_view(c).size();
        matched = true;
        break;
      }
    if (matched) continue;
    const size_t start = i;
    size_t j = (t[i] == ' ' && i + 1 < t.size() && cls_at(i + 1) != Cls::kSpace) ? i + 1 : i;
    const Cls c = cls_at(j);
    if (c != Cls::kSpace) {
      i = run(j, c);
    } else {
      // \s+(?!\S): a whitespace run, less its last character when a non-space follows it.
      size_t end = run(i, Cls::kSpace);
      i = (end < t.size() && end - start > 1) ? end - 1 : end;
    }
    out.emplace_back(t.substr(start, i - start));
  }
  return out;
}

std::vector<int> Gpt2Bpe::bpe(const std::string& raw) const {
  std::vector<std::string> parts;
  for (unsigned char c : raw) parts.push_back(byte_unicode_[c]);
  while (parts.size() > 1) {
    int best = INT_MAX;
    size_t at = 0;
    for (size_t k = 0; k + 1 < parts.size(); ++k) {
      auto r = ranks_.find({parts[k], parts[k + 1]});
      if (r != ranks_.end() && r->second < best) best = r->second, at = k;
    }
    if (best == INT_MAX) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  std::vector<int> ids;
  for (const auto& p : parts) {
    auto e = encoder_.find(p);
    if (e == encoder_.end()) throw DataError("BPE: symbol '" + p + "' is not in encoder.json");
    ids.push_back(e->second);
  }
  return ids;
}

std::vector<int> Gpt2Bpe::encode(std::string_view text) const {
  std::vector<int> ids;
  for (const auto& w : pretokenize(text)) {
    auto part = bpe(w);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

}  // namespace gpt2
