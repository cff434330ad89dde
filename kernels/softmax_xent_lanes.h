// defines: the fused classifier kernel's work for one thread of a row's block (kernels/cuda/classifier.cu): its
//          share of the row's max and sum of exponentials (online softmax, fp32), then its share of the gradient
//          scale·(softmax − onehot(t)) written over the logits. Plain C++ on the host too, where the CPU tests run
//          every thread of a block one after another against the ATen reference.
//
// Thread `tid` of kThreads takes packs tid, tid + kThreads, ... of the row (kVec elements: 16 bytes, or one), two
// loads in flight before either is used, where a warp would otherwise wait out a round trip to memory per pack.
// A pack costs its max and one rescale of the sum, without a branch, where a compare and a branch an element
// made the kernel issue-bound (~17 instructions an element with expf). The caller guarantees V % kVec == 0 and
// a row aligned to the pack. No libtorch here: T is float, c10::Half or c10::BFloat16.
#pragma once
#include <cmath>
#include <cstdint>

#include "kernels/packs.h"  // Pack, load, store, GPT2_LANE_FN, GPT2_UNROLL

namespace gpt2::kernels::xent {

// Running max and sum of e^(x − m) (kExp2: m of x·log2(e), the sum of 2^(x·log2(e) − m)). Trivial, as the
// kernel's __shared__ copies must be.
struct MaxSum {
  float m, s;
};
// Before any element: m the lowest finite float, not −inf, so each update rescales without a branch
// (e^(lowest − m) = 0) and a row of −inf (none in GPT-2's logits) makes no NaN.
GPT2_LANE_FN MaxSum nothing() { return {-3.402823466e38f, 0.0f}; }

constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// e^x, or with kExp2 2^x by the SFU's approximate ex2 alone (results under 2^-126, no part of a softmax's sum,
// flushed to 0), where expf first reduces its argument for its last bits: about seven instructions more.
template <bool kExp2>
GPT2_LANE_FN float exp_of(float x) {
#if defined(__CUDA_ARCH__)
  if constexpr (kExp2) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
  } else {
    return expf(x);
  }
#else
  return kExp2 ? std::exp2(x) : std::exp(x);
#endif
}

// x in the sum's base less m: x·log2(e) − m in one FMA with kExp2, else x − m
template <bool kExp2>
GPT2_LANE_FN float less(float x, float m) {
  if constexpr (!kExp2) return x - m;
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(x, kLog2e, -m);
#else
  return std::fma(x, kLog2e, -m);
#endif
}

template <bool kExp2>
GPT2_LANE_FN MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  return {m, a.s * exp_of<kExp2>(a.m - m) + b.s * exp_of<kExp2>(b.m - m)};
}

// v with a pack's elements added: the pack's max first, then one rescale of the sum and the pack's terms
template <bool kExp2, typename T, int kVec>
GPT2_LANE_FN MaxSum fold(MaxSum v, const Pack<T, kVec>& pk) {
  float x[kVec], top = static_cast<float>(pk.v[0]);
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) x[k] = static_cast<float>(pk.v[k]), top = fmaxf(top, x[k]);  // NaN: in the sum
  top = fmaxf(v.m, kExp2 ? top * kLog2e : top);
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) x[k] = exp_of<kExp2>(less<kExp2>(x[k], top));
  GPT2_UNROLL
  for (int w = kVec / 2; w > 0; w /= 2)  // a tree: no chain of kVec adds
    GPT2_UNROLL
    for (int k = 0; k < w; ++k) x[k] += x[k + w];
  return {top, v.s * exp_of<kExp2>(v.m - top) + x[0]};
}

// Thread tid's max and sum over the row x of `packs` packs; kStaged: each pack also kept in `staged` (shared
// memory on the GPU), where the gradient pass reads it back.
template <bool kExp2, bool kStaged, typename T, int kVec, int kThreads>
GPT2_LANE_FN MaxSum thread_max_sum(const T* x, int64_t packs, int tid, T* staged) {
  MaxSum v = nothing();
  int64_t p = tid;
  for (; p + kThreads < packs; p += 2 * kThreads) {
    const Pack<T, kVec> a = load<T, kVec>(x, p), b = load<T, kVec>(x, p + kThreads);
    if constexpr (kStaged) store<T, kVec>(staged, p, a), store<T, kVec>(staged, p + kThreads, b);
    v = fold<kExp2>(fold<kExp2>(v, a), b);
  }
  if (p < packs) {
    const Pack<T, kVec> a = load<T, kVec>(x, p);
    if constexpr (kStaged) store<T, kVec>(staged, p, a);
    v = fold<kExp2>(v, a);
  }
  return v;
}

// Pack p's gradient from its logits: e^(x − m)·scale_over_sum, less `scale` at the target t
template <bool kExp2, typename T, int kVec>
GPT2_LANE_FN Pack<T, kVec> gradient(const Pack<T, kVec>& pk, int64_t p, int64_t t, float m, float scale_over_sum,
                                    float scale) {
  float g[kVec];
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) g[k] = exp_of<kExp2>(less<kExp2>(static_cast<float>(pk.v[k]), m)) * scale_over_sum;
  const int64_t at = t - p * kVec;
  if (at >= 0 && at < kVec) {  // one pack of the row: each k compared, so g stays in registers
    GPT2_UNROLL
    for (int k = 0; k < kVec; ++k)
      if (k == at) g[k] -= scale;
  }
  Pack<T, kVec> out;
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) out.v[k] = static_cast<T>(g[k]);
  return out;
}

// Thread tid's packs of the row's gradient, from the row's max m and sum s (combined over every thread), written
// over x; the logits read from `from`: x itself, or the staged copy.
template <bool kExp2, typename T, int kVec, int kThreads>
GPT2_LANE_FN void thread_gradient(const T* from, T* x, int64_t packs, int tid, int64_t t, MaxSum row, float scale) {
  const float c = scale / row.s;
  int64_t p = tid;
  for (; p + kThreads < packs; p += 2 * kThreads) {
    const Pack<T, kVec> a = load<T, kVec>(from, p), b = load<T, kVec>(from, p + kThreads);
    store<T, kVec>(x, p, gradient<kExp2>(a, p, t, row.m, c, scale));
    store<T, kVec>(x, p + kThreads, gradient<kExp2>(b, p + kThreads, t, row.m, c, scale));
  }
  if (p < packs) store<T, kVec>(x, p, gradient<kExp2>(load<T, kVec>(from, p), p, t, row.m, c, scale));
}

// The row's loss from its max and sum: log(Σ e^x) − x_t
template <bool kExp2>
GPT2_LANE_FN float loss(MaxSum row, float target_logit) {
  const float m = kExp2 ? row.m * kLn2 : row.m;  // back in the logits' base
#if defined(__CUDA_ARCH__)
  return m + logf(row.s) - target_logit;
#else
  return m + std::log(row.s) - target_logit;
#endif
}

}  // namespace gpt2::kernels::xent
