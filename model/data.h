// defines: the synthetic corpus, TokenData (train/val token streams), Loader (B×T batches with
//          stride T), prepare_text. Shards and DataOptions: model/shard.h (no libtorch).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model/shard.h"

namespace gpt2 {

// A deterministic corpus with learnable structure: a Markov chain over a fixed set of `active`
// tokens spread across the vocabulary, each token followed by one of four successors with
// probabilities .55/.25/.15/.05. Entropy ≈ 1.1 nats/token, far below ln(vocab), so a model's
// loss visibly falls within a few hundred steps.
std::vector<uint16_t> synthetic_corpus(int64_t vocab, int64_t n_tokens, uint64_t seed, int64_t active = 512);

// Tokens as the int32 CPU tensor the loaders read.
at::Tensor to_token_tensor(const std::vector<uint16_t>& tokens);

struct TokenData {
  at::Tensor train, val;  // (N,) int32 on the CPU
};
// Loads (or generates) both splits and checks every token is < vocab.
TokenData load_token_data(const DataOptions& o, int64_t vocab, uint64_t seed);

// (input, target) batches of shape (B, T) from a token stream, stride B·T per rank, ranks reading
// disjoint slices (rank r starts at r·B·T and moves world·B·T per batch), wrapping at the end.
class Loader {
 public:
  Loader(at::Tensor tokens, int64_t B, int64_t T, int64_t rank = 0, int64_t world = 1);
  std::pair<at::Tensor, at::Tensor> next();  // int64 (B, T) each, on the CPU
  void reset();
  int64_t batch() const { return B_; }
  int64_t context() const { return T_; }

 private:
  at::Tensor tokens_;
  int64_t B_, T_, rank_, world_, pos_;
};

// `gpt2bench prepare`: text -> train/val shards. Byte-level tokens (0..255) unless a GPT-2 BPE
// (encoder.json + vocab.bpe) is given. Returns the files written.
struct PrepareOptions {
  std::string input, out_dir, encoder_json, vocab_bpe;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100'000'000;
};
std::vector<std::string> prepare_text(const PrepareOptions& o);

}  // namespace gpt2
