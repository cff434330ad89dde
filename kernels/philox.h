// defines: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11 — the generator
//          behind curand's and ATen's CUDA dropout) and DropoutMask, the keep-or-drop decision of one element of
//          a dropout made from it: a pure function of (seed, offset, element index), so a kernel may draw any
//          element from any thread, in any order, and the host (the CPU tests) draws the very same mask.
//
// Element i of a call uses 16 bits of the block Philox(counter = (i / 8, offset), key = seed), its (i mod 8)th
// half-word (word (i mod 8) / 2, low half first): the mask does not depend on how a kernel splits the rows among
// its threads. 16 bits, not 32: half the Philox rounds, which were a quarter to a third of the residual-norm
// kernels' sm_90 instructions (the keep probability is then 1 - p to within 2^-17; FlashAttention draws 8 bits an
// element). The key's high word is tagged, so these streams are not ATen's own (curand's counter layout differs,
// but the same seed and counter must never give two of a step's dropouts the same bits). No libtorch here
// (GPT2_LANE_FN: host and device).
#pragma once
#include <cstdint>

#include "kernels/packs.h"  // GPT2_LANE_FN, GPT2_UNROLL

namespace gpt2::kernels {

struct PhiloxBlock {
  uint32_t v0, v1, v2, v3;
};

// Ten rounds of Philox4x32 on counter c under key (k0, k1).
GPT2_LANE_FN PhiloxBlock philox4x32_10(PhiloxBlock c, uint32_t k0, uint32_t k1) {
  GPT2_UNROLL
  for (int i = 0; i < 10; ++i) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c.v0, p1 = uint64_t{0xCD9E8D57u} * c.v2;
    c = {static_cast<uint32_t>(p1 >> 32) ^ c.v1 ^ k0, static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c.v3 ^ k1, static_cast<uint32_t>(p0)};
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  return c;
}

GPT2_LANE_FN uint32_t word(const PhiloxBlock& b, uint64_t i) {  // i in 0..3, without indexing a local array
  return i == 0 ? b.v0 : i == 1 ? b.v1 : i == 2 ? b.v2 : b.v3;
}

GPT2_LANE_FN uint32_t half_word(const PhiloxBlock& b, uint64_t h) {  // h in 0..7
  const uint32_t w = word(b, h / 2);
  return h % 2 ? w >> 16 : w & 0xFFFFu;
}

struct DropoutMask {
  uint64_t seed = 0, offset = 0;  // the generator's, for this call (one offset a call: distinct calls, distinct bits)
  uint32_t threshold = 0;         // an element is kept when its 16 random bits are below this (at most 2^16)
  float scale = 1.0f;             // what a kept element is multiplied by: 1 / (1 - p)

  static constexpr uint32_t kKeyTag = 0x67707432u;  // "gpt2", in the key's high word

  GPT2_LANE_FN PhiloxBlock bits(uint64_t block) const {
    const PhiloxBlock counter{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                              static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
    return philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32) ^ kKeyTag);
  }
  // Whether elements e0 .. e0 + n - 1 are kept, bit k for element e0 + k (n <= 32; one Philox block per 8
  // elements met): one register, where n bools would take n.
  template <int n>
  GPT2_LANE_FN uint32_t keeps(uint64_t e0) const {
    static_assert(n >= 1 && n <= 32, "keeps: at most 32 elements at a time");
    PhiloxBlock b{};
    uint32_t out = 0;
    GPT2_UNROLL
    for (int k = 0; k < n; ++k) {
      const uint64_t e = e0 + k;
      if (k == 0 || e % 8 == 0) b = bits(e / 8);
      out |= static_cast<uint32_t>(half_word(b, e % 8) < threshold) << k;
    }
    return out;
  }
  // keeps<n> for a packed row's elements, with no branch between the Philox blocks and the loads they are used
  // beside: n a multiple of 8 and e0 of 8 (a pack of 8), n / 8 whole blocks; or n = 4 and e0 a multiple of 4
  // (a pack of 4 fp32), half a block.
  template <int n>
  GPT2_LANE_FN uint32_t keeps_aligned(uint64_t e0) const {
    static_assert(n % 8 == 0 || n == 4, "keeps_aligned: whole Philox blocks, or half of one");
    static_assert(n <= 32, "keeps_aligned: at most 32 elements at a time");
    if constexpr (n == 4) {  // the block's first four elements, or its second
      const PhiloxBlock b = bits(e0 / 8);
      return e0 % 8 == 0 ? below(b.v0) | below(b.v1) << 2 : below(b.v2) | below(b.v3) << 2;
    }
    uint32_t out = 0;
    GPT2_UNROLL
    for (int j = 0; j < n / 8; ++j) {
      const PhiloxBlock b = bits(e0 / 8 + j);
      out |= (below(b.v0) | below(b.v1) << 2 | below(b.v2) << 4 | below(b.v3) << 6) << (8 * j);
    }
    return out;
  }

 private:
  // bit 0: w's low half is below the threshold, bit 1: its high half
  GPT2_LANE_FN uint32_t below(uint32_t w) const {
    return static_cast<uint32_t>((w & 0xFFFFu) < threshold) | static_cast<uint32_t>((w >> 16) < threshold) << 1;
  }
};

// The threshold that keeps an element with probability 1 - p (0 <= p <= 1), to within 2^-17: 16 bits below it.
inline uint32_t keep_threshold(double p) {
  const double t = (1.0 - p) * 65536.0 + 0.5;
  return t <= 0 ? 0u : t >= 65536.0 ? 65536u : static_cast<uint32_t>(t);
}

// The mask of a dropout with probability p (0 < p < 1) drawn at (seed, offset); a kernel that reads its (seed,
// offset) on the device is given the rest here and fills them in.
inline DropoutMask dropout_mask(double p, uint64_t seed = 0, uint64_t offset = 0) {
  return {seed, offset, keep_threshold(p), static_cast<float>(1.0 / (1.0 - p))};
}

}  // namespace gpt2::kernels
