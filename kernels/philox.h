// defines: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11 — the generator
//          behind curand's and ATen's CUDA dropout) and DropoutMask, the keep-or-drop decision of one element of
//          a dropout made from it: a pure function of (seed, offset, element index), so a kernel may draw any
//          element from any thread, in any order, and the host (the CPU tests) draws the very same mask.
//
// Element i of a call uses 32-bit word i mod 4 of the block Philox(counter = (i / 4, offset), key = seed):
// the mask does not depend on how a kernel splits the rows among its threads. The key's high word is tagged,
// so these streams are not ATen's own (curand's counter layout differs, but the same seed and counter must never
// give two of a step's dropouts the same bits). No libtorch here (GPT2_LANE_FN: host and device).
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

struct DropoutMask {
  uint64_t seed = 0, offset = 0;  // the generator's, for this call (one offset a call: distinct calls, distinct bits)
  uint32_t threshold = 0;         // an element is kept when its 32 random bits are below this
  float scale = 1.0f;             // what a kept element is multiplied by: 1 / (1 - p)

  static constexpr uint32_t kKeyTag = 0x67707432u;  // "gpt2", in the key's high word

  GPT2_LANE_FN PhiloxBlock bits(uint64_t block) const {
    const PhiloxBlock counter{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                              static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32)};
    return philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32) ^ kKeyTag);
  }
  // Whether elements e0 .. e0 + n - 1 are kept, bit k for element e0 + k (n <= 32; one Philox block per 4
  // elements met): one register, where n bools would take n.
  template <int n>
  GPT2_LANE_FN uint32_t keeps(uint64_t e0) const {
    static_assert(n >= 1 && n <= 32, "keeps: at most 32 elements at a time");
    PhiloxBlock b{};
    uint32_t out = 0;
    GPT2_UNROLL
    for (int k = 0; k < n; ++k) {
      const uint64_t e = e0 + k;
      if (k == 0 || e % 4 == 0) b = bits(e / 4);
      out |= static_cast<uint32_t>(word(b, e % 4) < threshold) << k;
    }
    return out;
  }
  // keeps<n> where e0 and n are multiples of 4 (a packed row's elements: C a multiple of the pack): its n / 4
  // Philox blocks drawn unconditionally, with no branch between them and the loads they are used beside.
  template <int n>
  GPT2_LANE_FN uint32_t keeps_aligned(uint64_t e0) const {
    static_assert(n % 4 == 0 && n <= 32, "keeps_aligned: whole Philox blocks, at most 32 elements at a time");
    uint32_t out = 0;
    GPT2_UNROLL
    for (int j = 0; j < n / 4; ++j) {
      const PhiloxBlock b = bits(e0 / 4 + j);
      out |= (static_cast<uint32_t>(b.v0 < threshold) | static_cast<uint32_t>(b.v1 < threshold) << 1 |
              static_cast<uint32_t>(b.v2 < threshold) << 2 | static_cast<uint32_t>(b.v3 < threshold) << 3)
             << (4 * j);
    }
    return out;
  }
};

// The threshold that keeps an element with probability 1 - p (0 < p < 1), to within 2^-32.
inline uint32_t keep_threshold(double p) {
  const double t = (1.0 - p) * 4294967296.0;
  return t >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(t);
}

// The mask of a dropout with probability p (0 < p < 1) drawn at (seed, offset); a kernel that reads its (seed,
// offset) on the device is given the rest here and fills them in.
inline DropoutMask dropout_mask(double p, uint64_t seed = 0, uint64_t offset = 0) {
  return {seed, offset, keep_threshold(p), static_cast<float>(1.0 / (1.0 - p))};
}

}  // namespace gpt2::kernels
