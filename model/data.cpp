#include "model/data.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/files.h"
#include "common/format.h"
#include "model/bpe.h"

namespace gpt2 {

namespace {
// splitmix64: tiny, fast, and the same on every platform (std distributions are not).
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
};
}  // namespace

std::vector<uint16_t> synthetic_corpus(int64_t vocab, int64_t n_tokens, uint64_t seed, int64_t active) {
  if (vocab < 2 || vocab > 65536) throw DataError("synthetic corpus: vocab must be in [2, 65536]");
  active = std::min(active, vocab);
  // The chain's structure comes from a fixed seed: the train and val splits (different `seed`)
  // sample the same language.
  SplitMix structure{0x6770743262656e63ull};
  std::vector<uint16_t> ids(active);
  for (int64_t i = 0; i < active; ++i) ids[i] = static_cast<uint16_t>(i * (vocab / active));
  std::vector<std::array<int64_t, 4>> succ(active);
  for (auto& s : succ)
    for (auto& x : s) x = static_cast<int64_t>(structure.next() % active);
  constexpr double cdf[4] = {0.55, 0.80, 0.95, 1.0};
  SplitMix rng{seed};
  std::vector<uint16_t> out(n_tokens);
  int64_t state = static_cast<int64_t>(rng.next() % active);
  for (int64_t i = 0; i < n_tokens; ++i) {
    out[i] = ids[state];
    const double u = rng.uniform();
    int j = 0;
    while (u > cdf[j]) ++j;
    state = succ[state][j];
  }
  return out;
}

namespace {
at::Tensor load_split(const std::string& pattern, int64_t vocab, const char* split) {
  const auto shards = files::glob(pattern);
  if (shards.empty()) throw DataError(std::string(split) + " data: no shard matches '" + pattern + "'");
  std::vector<int32_t> all;
  for (const auto& f : shards) {
    auto t = read_shard(f);
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i] >= vocab)
        throw DataError(f + ": token " + std::to_string(t[i]) + " at position " + std::to_string(i) +
                        " is outside the model's vocabulary of " + std::to_string(vocab));
    all.insert(all.end(), t.begin(), t.end());
  }
  return at::tensor(all, at::kInt);
}

}  // namespace

at::Tensor to_token_tensor(const std::vector<uint16_t>& t) {
  return at::tensor(std::vector<int32_t>(t.begin(), t.end()), at::kInt);
}

TokenData load_token_data(const DataOptions& o, int64_t vocab, uint64_t seed) {
  if (o.synthetic)
    return {to_token_tensor(synthetic_corpus(vocab, o.synthetic_tokens, seed)),
            to_token_tensor(synthetic_corpus(vocab, o.synthetic_tokens / 10 + 1, seed + 1))};
  return {load_split(o.train_glob, vocab, "train"), load_split(o.val_glob, vocab, "val")};
}

Loader::Loader(at::Tensor tokens, int64_t B, int64_t T, int64_t rank, int64_t world)
    : tokens_(std::move(tokens)), B_(B), T_(T), rank_(rank), world_(world), pos_(0) {
  if (tokens_.numel() < world_ * B_ * T_ + 1)
    throw DataError("the data holds " + std::to_string(tokens_.numel()) + " tokens, fewer than one batch of " +
                    std::to_string(world_) + "×" + std::to_string(B_) + "×" + std::to_string(T_) + "+1");
  reset();
}

void Loader::reset() { pos_ = rank_ * B_ * T_; }

std::pair<at::Tensor, at::Tensor> Loader::next() {
  const int64_t n = B_ * T_;
  if (pos_ + n + 1 > tokens_.numel()) pos_ = rank_ * n;
  auto buf = tokens_.narrow(0, pos_, n + 1).to(at::kLong);
  pos_ += world_ * n;
  return {buf.narrow(0, 0, n).view({B_, T_}), buf.narrow(0, 1, n).view({B_, T_})};
}

std::vector<std::string> prepare_text(const PrepareOptions& o) {
  if (files::is_dir(o.input)) throw DataError(o.input + ": a directory; --input takes one text file");
  const auto old = files::glob(files::join(o.out_dir, "train_*.bin")), old_val = files::glob(files::join(o.out_dir, "val_*.bin"));
  if (!old.empty() || !old_val.empty())  // train_*.bin would read both corpora as one
    throw DataError(o.out_dir + " already holds shards (" + files::filename((old.empty() ? old_val : old)[0]) +
                    ", " + std::to_string(old.size() + old_val.size()) + " in all): choose another --out, or remove them");
  std::ifstream in(o.input, std::ios::binary);
  if (!in) throw DataError(o.input + ": cannot open input text");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  if (text.empty()) throw DataError(o.input + ": the input text is empty");
  if (o.val_fraction <= 0.0 || o.val_fraction >= 1.0) throw DataError("--val-fraction must be in (0, 1)");
  if (o.shard_tokens < 1) throw DataError("--shard-tokens must be positive");

  std::vector<uint16_t> tokens;
  if (!o.encoder_json.empty() || !o.vocab_bpe.empty()) {
    if (o.encoder_json.empty() || o.vocab_bpe.empty())
      throw DataError("GPT-2 BPE needs both --encoder (encoder.json) and --bpe (vocab.bpe)");
    Gpt2Bpe bpe(o.encoder_json, o.vocab_bpe);
    for (int id : bpe.encode(text)) tokens.push_back(static_cast<uint16_t>(id));
  } else {
    for (unsigned char c : text) tokens.push_back(c);
  }
  const auto n_val = std::max<int64_t>(1, static_cast<int64_t>(tokens.size() * o.val_fraction));
  if (static_cast<int64_t>(tokens.size()) - n_val < 2)
    throw DataError(o.input + ": too little text for a train/val split (" + std::to_string(tokens.size()) + " tokens)");
  files::create_dirs(o.out_dir);
  std::vector<std::string> written;
  auto emit = [&](const char* split, auto begin, auto end) {
    int shard = 0;
    for (auto it = begin; it < end; it += std::min<int64_t>(o.shard_tokens, end - it)) {
      const auto path = files::join(o.out_dir, strf("%s_%06d.bin", split, shard++));
      write_shard(path, std::vector<uint16_t>(it, it + std::min<int64_t>(o.shard_tokens, end - it)));
      written.push_back(path);
    }
  };
  // Validation data first, as llm.c's scripts do: the first `val_fraction` of the text.
  emit("val", tokens.begin(), tokens.begin() + n_val);
  emit("train", tokens.begin() + n_val, tokens.end());
  return written;
}

}  // namespace gpt2
