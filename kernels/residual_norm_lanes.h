// defines: the fused residual-add + LayerNorm's sweeps over one row as one lane of a 32-lane warp does them —
//          the bodies of the CUDA kernels (kernels/cuda/residual_norm.cu), which add the lanes' partial sums
//          with warp shuffles between the sweeps. Plain C++ on the host too, so the CPU tests run the kernels'
//          own index arithmetic (which lane reads which elements, packed or not) against the ATen reference
//          with the lanes simulated one after another. Two traversals of one pack's arithmetic: the sweeps
//          read the row again for each (any C), the held ones keep the lane's packs in registers between them.
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

template <typename T, int kVec, bool kDropout>
GPT2_LANE_FN uint32_t kept_bits(const DropoutMask& drop, int64_t row, int64_t C, int64_t p) {
  if constexpr (kDropout && kVec % 4 == 0)  // C % kVec == 0: a pack is a Philox block (8 elements) or half of one
    return drop.keeps_aligned<kVec>(static_cast<uint64_t>(row * C + p * kVec));
  else if constexpr (kDropout)
    return drop.keeps<kVec>(static_cast<uint64_t>(row * C + p * kVec));
  return 0;
}

// One pack's arithmetic, which both traversals below share.
// s = a + dropout(b + c) for a pack of x (a), r (b) and, where `biased`, the bias (c), its elements' sum added to
// `sum`. b + c is rounded to T once, as a linear's biased output is; the dropout keeps element k where bit k of
// `kept` is set.
template <typename T, int kVec, bool kDropout>
GPT2_LANE_FN Pack<T, kVec> add_pack(const Pack<T, kVec>& a, Pack<T, kVec> b, const Pack<T, kVec>& c, bool biased,
                                    uint32_t kept, const DropoutMask& drop, float& sum) {
  Pack<T, kVec> out;
  if (biased) {
    GPT2_UNROLL
    for (int k = 0; k < kVec; ++k) b.v[k] = static_cast<T>(static_cast<float>(b.v[k]) + static_cast<float>(c.v[k]));
  }
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) {
    float branch = static_cast<float>(b.v[k]);
    if constexpr (kDropout) branch = mul_rn(branch, (kept >> k) & 1u ? drop.scale : 0.0f);  // as the reference
    out.v[k] = static_cast<T>(static_cast<float>(a.v[k]) + branch);
    sum += static_cast<float>(out.v[k]);
  }
  return out;
}

template <typename T, int kVec>
GPT2_LANE_FN float squared_deviation_pack(const Pack<T, kVec>& a, float mean) {
  float sq = 0.0f;
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) {
    const float d = static_cast<float>(a.v[k]) - mean;
    sq += d * d;
  }
  return sq;
}

// y = (s - mean)·rstd·gamma + beta
template <typename T, int kVec>
GPT2_LANE_FN Pack<T, kVec> normalize_pack(const Pack<T, kVec>& a, const Pack<T, kVec>& g, const Pack<T, kVec>& b,
                                          float mean, float rstd) {
  Pack<T, kVec> out;
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k)
    out.v[k] = static_cast<T>((static_cast<float>(a.v[k]) - mean) * rstd * static_cast<float>(g.v[k]) +
                              static_cast<float>(b.v[k]));
  return out;
}

struct GradSums {
  float dy_gamma = 0.0f, dy_gamma_xhat = 0.0f;  // the lane's sums of dy·gamma and dy·gamma·xhat
};

// The pack's dy·gamma and dy·gamma·xhat added to `out`; add(k, dy·xhat, dy) given element k's gamma and beta
// gradient terms (each added where it is made: fewer live registers than returning them all).
template <typename T, int kVec, class Add>
GPT2_LANE_FN void grad_sums_pack(const Pack<T, kVec>& d, const Pack<T, kVec>& a, const Pack<T, kVec>& g, float mean,
                                 float rstd, GradSums& out, Add add) {
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) {
    const float dyk = static_cast<float>(d.v[k]), xhat = (static_cast<float>(a.v[k]) - mean) * rstd;
    const float dxhat = dyk * static_cast<float>(g.v[k]);
    out.dy_gamma += dxhat;
    out.dy_gamma_xhat += dxhat * xhat;
    add(k, dyk * xhat, dyk);
  }
}

// ds = ds_out + rstd·(dy·gamma - mean(dy·gamma) - xhat·mean(dy·gamma·xhat)) for the pack (o: ds_out's where has_o);
// `branch` the residual branch's gradient: ds·scale where kept, else 0, with kDropout; ds without.
template <typename T, int kVec, bool kDropout>
GPT2_LANE_FN Pack<T, kVec> grad_input_pack(const Pack<T, kVec>& d, const Pack<T, kVec>& a, const Pack<T, kVec>& g,
                                           const Pack<T, kVec>& o, bool has_o, float mean, float rstd, float mean_dy_gamma,
                                           float mean_dy_gamma_xhat, uint32_t kept, const DropoutMask& drop,
                                           Pack<T, kVec>& branch) {
  Pack<T, kVec> out;
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) {
    const float xhat = (static_cast<float>(a.v[k]) - mean) * rstd;
    const float dx = rstd * (static_cast<float>(d.v[k]) * static_cast<float>(g.v[k]) - mean_dy_gamma -
                             xhat * mean_dy_gamma_xhat);
    out.v[k] = static_cast<T>(dx + (has_o ? static_cast<float>(o.v[k]) : 0.0f));
  }
  branch = out;
  if constexpr (kDropout) {
    GPT2_UNROLL
    for (int k = 0; k < kVec; ++k)
      branch.v[k] = static_cast<T>(static_cast<float>(out.v[k]) * ((kept >> k) & 1u ? drop.scale : 0.0f));
  }
  return out;
}

// The sweeps: the row read from memory in each.
// Forward, sweep 1: s = x + r (rounded to T) written; returns the lane's sum of s. With `bias` (C elements, or
// null: none), the branch is r + bias. With kDropout, element j of row `row` is kept or dropped as drop says for
// element row·C + j; keep (the row's mask), where given, is written (the CPU tests' view of it: the kernel writes
// none, its backward draws the same bits again).
template <typename T, int kVec, bool kDropout = false>
GPT2_LANE_FN float add_and_sum(const T* x, const T* r, T* s, int64_t C, int lane, const DropoutMask& drop = {},
                               int64_t row = 0, bool* keep = nullptr, const T* bias = nullptr) {
  float sum = 0.0f;
  for (int64_t p = lane; p < C / kVec; p += kLanes) {
    const uint32_t kept = kept_bits<T, kVec, kDropout>(drop, row, C, p);
    const Pack<T, kVec> c = bias ? load<T, kVec>(bias, p) : Pack<T, kVec>{};
    store<T, kVec>(s, p, add_pack<T, kVec, kDropout>(load<T, kVec>(x, p), load<T, kVec>(r, p), c, bias, kept, drop,
                                                     sum));
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
  for (int64_t p = lane; p < C / kVec; p += kLanes) sq += squared_deviation_pack<T, kVec>(load<T, kVec>(s, p), mean);
  return sq;
}

// Forward, sweep 3: y = (s - mean)·rstd·gamma + beta.
template <typename T, int kVec>
GPT2_LANE_FN void normalize(const T* s, const T* gamma, const T* beta, T* y, float mean, float rstd, int64_t C,
                            int lane) {
  for (int64_t p = lane; p < C / kVec; p += kLanes)
    store<T, kVec>(y, p, normalize_pack<T, kVec>(load<T, kVec>(s, p), load<T, kVec>(gamma, p),
                                                 load<T, kVec>(beta, p), mean, rstd));
}

// Backward, sweep 1: the lane's GradSums, and dy·xhat and dy added into the warp's accumulators dgamma and
// dbeta (C floats each, laid out by acc_index; a lane only ever touches its own packs' elements).
template <typename T, int kVec>
GPT2_LANE_FN GradSums grad_sums(const T* dy, const T* s, const T* gamma, float mean, float rstd, float* dgamma,
                                float* dbeta, int64_t C, int lane) {
  GradSums out;
  const int64_t packs = C / kVec;
  for (int64_t p = lane; p < packs; p += kLanes) {
    grad_sums_pack<T, kVec>(load<T, kVec>(dy, p), load<T, kVec>(s, p), load<T, kVec>(gamma, p), mean, rstd, out,
                            [&](int k, float dg, float db) { dgamma[k * packs + p] += dg, dbeta[k * packs + p] += db; });
  }
  return out;
}

// Backward, sweep 2: ds = ds_out + LayerNorm'(dy), the two means from the whole warp's GradSums; ds_out may be
// null (no gradient from the residual stream). With kDropout, dr = ds·scale where drop kept element row·C + j,
// else 0: the residual branch's gradient through its dropout, the forward's mask drawn again. With dbias (the
// warp's C accumulators, laid out as grad_sums's; null: none), the branch's gradient is added into it.
template <typename T, int kVec, bool kDropout = false>
GPT2_LANE_FN void grad_input(const T* dy, const T* s, const T* gamma, const T* ds_out, T* ds, float mean, float rstd,
                             float mean_dy_gamma, float mean_dy_gamma_xhat, int64_t C, int lane,
                             const DropoutMask& drop = {}, int64_t row = 0, T* dr = nullptr, float* dbias = nullptr) {
  const int64_t packs = C / kVec;
  for (int64_t p = lane; p < packs; p += kLanes) {
    const uint32_t kept = kept_bits<T, kVec, kDropout>(drop, row, C, p);  // before the loads, as few live at once
    const Pack<T, kVec> o = ds_out ? load<T, kVec>(ds_out, p) : Pack<T, kVec>{};
    Pack<T, kVec> branch;
    store<T, kVec>(ds, p, grad_input_pack<T, kVec, kDropout>(load<T, kVec>(dy, p), load<T, kVec>(s, p),
                                                             load<T, kVec>(gamma, p), o, ds_out != nullptr, mean, rstd,
                                                             mean_dy_gamma, mean_dy_gamma_xhat, kept, drop, branch));
    if constexpr (kDropout) store<T, kVec>(dr, p, branch);
    if (dbias) {
      GPT2_UNROLL
      for (int k = 0; k < kVec; ++k) dbias[k * packs + p] += static_cast<float>(branch.v[k]);
    }
  }
}

// The held traversal: a lane's packs lane + 32·i, i < kMax, kept in registers (C / kVec <= 32·kMax) — the row
// read once. Each step loads all its packs of the rows (x and r; dy and s; ds_out) before using the first: one
// round trip to memory, where pack by pack took three at GPT-2's C; gamma, beta and the bias (C elements, cached)
// beside their use, in fewer registers. In the backward, gamma's, beta's and the bias's gradients go to the
// warp's accumulators as the sweeps' do (held there, 72 registers a lane for GPT-2's rows, they cost a third of
// the warps an SM holds). Each loop is unrolled, so the arrays stay in registers.
template <typename T, int kVec, int kMax>
struct Held {
  Pack<T, kVec> v[kMax];
};

// Packs lane + 32·i of `row` into `to` (a lane's packs of the row; those past its end not loaded).
template <typename T, int kVec, int kMax>
GPT2_LANE_FN void load_held(const T* row, Held<T, kVec, kMax>& to, int64_t C, int lane) {
  GPT2_UNROLL
  for (int i = 0; i < kMax; ++i)
    if (const int64_t p = lane + i * kLanes; p < C / kVec) to.v[i] = load<T, kVec>(row, p);
}

// Forward, sweep 1, its s held: add_and_sum's.
template <typename T, int kVec, int kMax, bool kDropout = false>
GPT2_LANE_FN float add_and_sum_held(const T* x, const T* r, T* s, Held<T, kVec, kMax>& held, int64_t C, int lane,
                                    const DropoutMask& drop = {}, int64_t row = 0, const T* bias = nullptr) {
  Held<T, kVec, kMax> branch;
  load_held(x, held, C, lane);
  load_held(r, branch, C, lane);
  float sum = 0.0f;
  GPT2_UNROLL
  for (int i = 0; i < kMax; ++i)
    if (const int64_t p = lane + i * kLanes; p < C / kVec) {
      const Pack<T, kVec> b = bias ? load<T, kVec>(bias, p) : Pack<T, kVec>{};
      held.v[i] = add_pack<T, kVec, kDropout>(held.v[i], branch.v[i], b, bias != nullptr,
                                              kept_bits<T, kVec, kDropout>(drop, row, C, p), drop, sum);
      store<T, kVec>(s, p, held.v[i]);
    }
  return sum;
}

template <typename T, int kVec, int kMax>
GPT2_LANE_FN float squared_deviation_held(const Held<T, kVec, kMax>& s, float mean, int64_t C, int lane) {
  float sq = 0.0f;
  GPT2_UNROLL
  for (int i = 0; i < kMax; ++i)
    if (lane + i * kLanes < C / kVec) sq += squared_deviation_pack<T, kVec>(s.v[i], mean);
  return sq;
}

template <typename T, int kVec, int kMax>
GPT2_LANE_FN void normalize_held(const Held<T, kVec, kMax>& s, const T* gamma, const T* beta, T* y, float mean,
                                 float rstd, int64_t C, int lane) {
  GPT2_UNROLL
  for (int i = 0; i < kMax; ++i)
    if (const int64_t p = lane + i * kLanes; p < C / kVec)
      store<T, kVec>(y, p,
                     normalize_pack<T, kVec>(s.v[i], load<T, kVec>(gamma, p), load<T, kVec>(beta, p), mean, rstd));
}

// Backward, sweep 1: dy's and s's packs read and held; dy·xhat and dy added into the warp's accumulators as
// grad_sums adds them.
template <typename T, int kVec, int kMax>
GPT2_LANE_FN GradSums grad_sums_held(const T* dy, const T* s, const T* gamma, float mean, float rstd,
                                     Held<T, kVec, kMax>& dy_held, Held<T, kVec, kMax>& s_held, float* dgamma,
                                     float* dbeta, int64_t C, int lane) {
  load_held(dy, dy_held, C, lane);
  load_held(s, s_held, C, lane);
  GradSums out;
  const int64_t packs = C / kVec;
  GPT2_UNROLL
  for (int i = 0; i < kMax; ++i)
    if (const int64_t p = lane + i * kLanes; p < packs) {
      grad_sums_pack<T, kVec>(dy_held.v[i], s_held.v[i], load<T, kVec>(gamma, p), mean, rstd, out,
                              [&](int k, float dg, float db) { dgamma[k * packs + p] += dg, dbeta[k * packs + p] += db; });
    }
  return out;
}

// Backward, sweep 2 from the held packs: grad_input's, the branch's gradient added into dbias where given. ds_out's
// packs loaded first: the dropout's draws run while they arrive.
template <typename T, int kVec, int kMax, bool kDropout = false>
GPT2_LANE_FN void grad_input_held(const Held<T, kVec, kMax>& dy, const Held<T, kVec, kMax>& s, const T* gamma,
                                  const T* ds_out, T* ds, float mean, float rstd,
                                  float mean_dy_gamma, float mean_dy_gamma_xhat, int64_t C, int lane,
                                  const DropoutMask& drop, int64_t row, T* dr, float* dbias) {
  const int64_t packs = C / kVec;
  Held<T, kVec, kMax> o{};
  if (ds_out) load_held(ds_out, o, C, lane);
  GPT2_UNROLL
  for (int i = 0; i < kMax; ++i)
    if (const int64_t p = lane + i * kLanes; p < packs) {
      Pack<T, kVec> branch;
      const uint32_t kept = kept_bits<T, kVec, kDropout>(drop, row, C, p);
      store<T, kVec>(ds, p, grad_input_pack<T, kVec, kDropout>(dy.v[i], s.v[i], load<T, kVec>(gamma, p), o.v[i],
                                                               ds_out != nullptr, mean, rstd, mean_dy_gamma,
                                                               mean_dy_gamma_xhat, kept, drop, branch));
      if constexpr (kDropout) store<T, kVec>(dr, p, branch);
      if (dbias) {
        GPT2_UNROLL
        for (int k = 0; k < kVec; ++k) dbias[k * packs + p] += static_cast<float>(branch.v[k]);
      }
    }
}

}  // namespace gpt2::kernels::lanes
