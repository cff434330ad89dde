// defines: the fused residual-add + LayerNorm's sweeps over one row as one lane of a 32-lane warp does them —
//          the bodies of the CUDA kernels (kernels/cuda/residual_norm.cu), which add the lanes' partial sums
//          with warp shuffles between the sweeps. Plain C++ on the host too, so the CPU tests run the kernels'
//          own index arithmetic (which lane reads which elements, packed or not) against the ATen reference
//          with the lanes simulated one after another.
//
// A lane reads its row kVec elements at a time (a Pack: 16 bytes for kVec = 16 / sizeof(T), one element for
// kVec = 1): packs lane, lane + 32, lane + 64, ... of the C / kVec in the row. The caller guarantees that
// C % kVec == 0 and that every row pointer is aligned to the pack. No libtorch here: T is float, c10::Half or
// c10::BFloat16, whichever converts to and from float.
#pragma once
#include <cstdint>

#include "kernels/packs.h"   // Pack, load, store, mul_rn, GPT2_LANE_FN, GPT2_UNROLL
#include "kernels/philox.h"  // DropoutMask

namespace gpt2::kernels::lanes {

constexpr int kLanes = 32;

// Where element j of a row's C sums sits in a warp's accumulators (gamma's, beta's, the bias's gradients): element k of
// pack p at k·(C / kVec) + p, so the 32 lanes, on packs p..p+31, touch 32 consecutive floats (no shared-memory
// bank conflicts); for kVec = 1 simply j.
template <int kVec>
GPT2_LANE_FN int64_t acc_index(int64_t j, int64_t C) {
  return (j % kVec) * (C / kVec) + j / kVec;
}

// Forward, sweep 1: s = x + r (rounded to T) written; returns the lane's sum of s. With `bias` (C elements, or
// null: none), the branch is r + bias, rounded to T once as a linear's biased output is: the linear that made r
// left its bias to this pass. With kDropout, the branch is before its dropout: element j of row `row` is kept
// (branch·scale added) or dropped (nothing added) as drop says for element row·C + j; keep (the row's mask), where
// given, is written (the CPU tests' view of it: the kernel writes none, its backward draws the same bits again).
template <typename T, int kVec, bool kDropout = false>
GPT2_LANE_FN float add_and_sum(const T* x, const T* r, T* s, int64_t C, int lane, const DropoutMask& drop = {},
                               int64_t row = 0, bool* keep = nullptr, const T* bias = nullptr) {
  float sum = 0.0f;
  for (int64_t p = lane; p < C / kVec; p += kLanes) {
    const Pack<T, kVec> a = load<T, kVec>(x, p);
    Pack<T, kVec> b = load<T, kVec>(r, p);
    if (bias) {
      const Pack<T, kVec> c = load<T, kVec>(bias, p);
      GPT2_UNROLL
      for (int k = 0; k < kVec; ++k) b.v[k] = static_cast<T>(static_cast<float>(b.v[k]) + static_cast<float>(c.v[k]));
    }
    Pack<T, kVec> out;
    uint32_t kept = 0;
    if constexpr (kDropout) kept = drop.keeps<kVec>(static_cast<uint64_t>(row * C + p * kVec));
    GPT2_UNROLL
    for (int k = 0; k < kVec; ++k) {
      float branch = static_cast<float>(b.v[k]);
      if constexpr (kDropout) branch = mul_rn(branch, (kept >> k) & 1u ? drop.scale : 0.0f);  // as the reference
      out.v[k] = static_cast<T>(static_cast<float>(a.v[k]) + branch);
      sum += static_cast<float>(out.v[k]);
    }
    store<T, kVec>(s, p, out);
    if (kDropout && keep) {
      Pack<bool, kVec> mask;
      GPT2_UNROLL
      for (int k = 0; k < kVec; ++k) mask.v[k] = (kept >> k) & 1u;
      store<bool, kVec>(keep, p, mask);
    }
  }
  return sum;
}

// Forward, sweep 2: the lane's sum of (s - mean)².
template <typename T, int kVec>
GPT2_LANE_FN float squared_deviation(const T* s, float mean, int64_t C, int lane) {
  float sq = 0.0f;
  for (int64_t p = lane; p < C / kVec; p += kLanes) {
    const Pack<T, kVec> a = load<T, kVec>(s, p);
    GPT2_UNROLL
    for (int k = 0; k < kVec; ++k) {
      const float d = static_cast<float>(a.v[k]) - mean;
      sq += d * d;
    }
  }
  return sq;
}

// Forward, sweep 3: y = (s - mean)·rstd·gamma + beta.
template <typename T, int kVec>
GPT2_LANE_FN void normalize(const T* s, const T* gamma, const T* beta, T* y, float mean, float rstd, int64_t C,
                            int lane) {
  for (int64_t p = lane; p < C / kVec; p += kLanes) {
    const Pack<T, kVec> a = load<T, kVec>(s, p), g = load<T, kVec>(gamma, p), b = load<T, kVec>(beta, p);
    Pack<T, kVec> out;
    GPT2_UNROLL
    for (int k = 0; k < kVec; ++k)
      out.v[k] = static_cast<T>((static_cast<float>(a.v[k]) - mean) * rstd * static_cast<float>(g.v[k]) +
                                static_cast<float>(b.v[k]));
    store<T, kVec>(y, p, out);
  }
}

struct GradSums {
  float dy_gamma = 0.0f, dy_gamma_xhat = 0.0f;  // the lane's sums of dy·gamma and dy·gamma·xhat
};

// Backward, sweep 1: the lane's GradSums, and dy·xhat and dy added into the warp's accumulators dgamma and
// dbeta (C floats each, laid out by acc_index; a lane only ever touches its own packs' elements).
template <typename T, int kVec>
GPT2_LANE_FN GradSums grad_sums(const T* dy, const T* s, const T* gamma, float mean, float rstd, float* dgamma,
                                float* dbeta, int64_t C, int lane) {
  GradSums out;
  const int64_t packs = C / kVec;
  for (int64_t p = lane; p < packs; p += kLanes) {
    const Pack<T, kVec> d = load<T, kVec>(dy, p), a = load<T, kVec>(s, p), g = load<T, kVec>(gamma, p);
    GPT2_UNROLL
    for (int k = 0; k < kVec; ++k) {
      const float dyk = static_cast<float>(d.v[k]), xhat = (static_cast<float>(a.v[k]) - mean) * rstd;
      const float dxhat = dyk * static_cast<float>(g.v[k]);
      out.dy_gamma += dxhat;
      out.dy_gamma_xhat += dxhat * xhat;
      dgamma[k * packs + p] += dyk * xhat;
      dbeta[k * packs + p] += dyk;
    }
  }
  return out;
}

// Backward, sweep 2: ds = ds_out + rstd·(dy·gamma - mean(dy·gamma) - xhat·mean(dy·gamma·xhat)), the two means
// from the whole warp's GradSums; ds_out may be null (no gradient from the residual stream). With kDropout,
// dr = ds·scale where drop kept element row·C + j, else 0: the residual branch's gradient through its dropout,
// the forward's mask drawn again. With dbias (the warp's C accumulators, laid out as grad_sums's; null: none),
// the branch's gradient (dr, or ds without dropout) is added into it: the bias's gradient, summed over rows.
template <typename T, int kVec, bool kDropout = false>
GPT2_LANE_FN void grad_input(const T* dy, const T* s, const T* gamma, const T* ds_out, T* ds, float mean, float rstd,
                             float mean_dy_gamma, float mean_dy_gamma_xhat, int64_t C, int lane,
                             const DropoutMask& drop = {}, int64_t row = 0, T* dr = nullptr, float* dbias = nullptr) {
  const int64_t packs = C / kVec;
  for (int64_t p = lane; p < packs; p += kLanes) {
    uint32_t kept = 0;
    if constexpr (kDropout) kept = drop.keeps<kVec>(static_cast<uint64_t>(row * C + p * kVec));
    const Pack<T, kVec> d = load<T, kVec>(dy, p), a = load<T, kVec>(s, p), g = load<T, kVec>(gamma, p);
    Pack<T, kVec> o{};
    if (ds_out) o = load<T, kVec>(ds_out, p);
    Pack<T, kVec> out;
    GPT2_UNROLL
    for (int k = 0; k < kVec; ++k) {
      const float xhat = (static_cast<float>(a.v[k]) - mean) * rstd;
      const float dx = rstd * (static_cast<float>(d.v[k]) * static_cast<float>(g.v[k]) - mean_dy_gamma -
                               xhat * mean_dy_gamma_xhat);
      out.v[k] = static_cast<T>(dx + (ds_out ? static_cast<float>(o.v[k]) : 0.0f));
    }
    store<T, kVec>(ds, p, out);
    Pack<T, kVec> branch = out;
    if constexpr (kDropout) {
      GPT2_UNROLL
      for (int k = 0; k < kVec; ++k)
        branch.v[k] = static_cast<T>(static_cast<float>(out.v[k]) * ((kept >> k) & 1u ? drop.scale : 0.0f));
      store<T, kVec>(dr, p, branch);
    }
    if (dbias) {
      GPT2_UNROLL
      for (int k = 0; k < kVec; ++k) dbias[k * packs + p] += static_cast<float>(branch.v[k]);
    }
  }
}

}  // namespace gpt2::kernels::lanes
