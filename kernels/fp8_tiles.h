// defines: FP8 quantization into both layouts at once, as the CUDA kernel (kernels/cuda/fp8_quantize.cu) does it,
//          tile by tile and thread by thread: plain C++ on the host too, where the CPU tests run every (tile,
//          thread) against ATen's divide-then-transposed-copy. at::_scaled_mm takes its operands K-major only, so
//          FP8's backward needs x, w and the gradient transposed as well (Transformer Engine's cast_transpose).
//
// A block quantizes a tile of kTile × kTile elements of t (N × K, row-major): each thread reads its 16-byte packs,
// divides each element by the inverse scale in fp32 and casts it to F (ATen's own arithmetic: the same bits),
// writes them row-major and stages their bytes; after the block's barrier each thread writes 16 bytes of the
// tile's transpose (K × N). The caller guarantees K % kPack<T> == 0, N % 16 == 0 and 16-byte aligned pointers.
// No libtorch here: T is float, c10::Half or c10::BFloat16; F c10::Float8_e4m3fn or c10::Float8_e5m2.
#pragma once
#include <cstdint>
#include <limits>

#if defined(__CUDACC__)
#include <cuda_fp8.h>
#endif

#include "kernels/packs.h"  // Pack, kPack, load, store, GPT2_LANE_FN, GPT2_UNROLL

namespace gpt2::kernels::fp8 {

constexpr int kTile = 64;
constexpr int kThreads = 256;
constexpr int kChunk = 16;  // bytes of the transpose a thread writes: 16 rows of t
static_assert(kTile * (kTile / kChunk) == kThreads, "write_transposed: one chunk a thread");

// amax / the format's largest value, amax at least 1e-12 (a NaN kept): the inverse scale quantize_fp8_reference's
// clamp and divide make, computed by each thread, so the kernel needs no launches of its own for it.
GPT2_LANE_FN float inverse_scale_of(float amax, float top) { return (amax < 1e-12f ? 1e-12f : amax) / top; }

// The tile's bytes between the two phases; 4 bytes after each row keep a warp's column reads off one bank.
struct Staged {
  uint8_t b[kTile][kTile + 4];
};

// a and b cast to F. On sm_89+ one cvt.rn.satfinite a pair, where c10's cast takes ~25 instructions an element:
// the same bits for every float a scaled tensor holds (|x| <= F's largest, or NaN; all 2^32 compared against
// cuda_fp8.h's host emulation of the instruction). Elsewhere c10's cast.
template <typename F>
GPT2_LANE_FN void cast_pair(float a, float b, F& qa, F& qb) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  constexpr __nv_fp8_interpretation_t kind = std::numeric_limits<F>::digits == 4 ? __NV_E4M3 : __NV_E5M2;
  const __nv_fp8x2_storage_t two = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, kind);
  qa = F(static_cast<uint8_t>(two & 0xff), F::from_bits());
  qb = F(static_cast<uint8_t>(two >> 8), F::from_bits());
#else
  qa = static_cast<F>(a), qb = static_cast<F>(b);
#endif
}

// Phase one for thread `tid` of tile (tile_row, tile_col): its packs of t quantized, written row-major, staged.
template <typename T, typename F>
GPT2_LANE_FN void quantize_rows(const T* t, int64_t N, int64_t K, float inverse_scale, F* out, Staged& staged,
                                int64_t tile_row, int64_t tile_col, int tid) {
  constexpr int kVec = kPack<T>, kPacksPerRow = kTile / kVec, kSteps = kTile * kPacksPerRow / kThreads;
  static_assert(kVec % 2 == 0 && kSteps * kThreads == kTile * kPacksPerRow, "quantize_rows: pairs, whole steps");
  struct Spot {
    int r, c;          // in the tile
    int64_t row, col;  // in t
    bool inside;       // K holds whole packs
  };
  auto spot = [&](int i) {  // step i's pack
    const int p = tid + i * kThreads, r = p / kPacksPerRow, c = (p % kPacksPerRow) * kVec;
    const int64_t row = tile_row * kTile + r, col = tile_col * kTile + c;
    return Spot{r, c, row, col, row < N && col < K};
  };
  Pack<T, kVec> in[kSteps] = {};
  GPT2_UNROLL
  for (int i = 0; i < kSteps; ++i) {  // every load first, each behind its own check: their round trips overlap
    const Spot at = spot(i);
    if (at.inside) in[i] = load<T, kVec>(t + at.row * K, at.col / kVec);
  }
  GPT2_UNROLL
  for (int i = 0; i < kSteps; ++i) {
    const Spot at = spot(i);
    if (!at.inside) continue;
    Pack<F, kVec> q;
    GPT2_UNROLL
    for (int k = 0; k < kVec; k += 2)
      cast_pair(static_cast<float>(in[i].v[k]) / inverse_scale, static_cast<float>(in[i].v[k + 1]) / inverse_scale,
                q.v[k], q.v[k + 1]);
    GPT2_UNROLL
    for (int k = 0; k < kVec; ++k) staged.b[at.r][at.c + k] = q.v[k].x;
    store<F, kVec>(out + at.row * K, at.col / kVec, q);
  }
}

// Phase two, after every thread's phase one: column c of the tile, rows r0 .. r0 + 15, as one 16-byte store.
template <typename F>
GPT2_LANE_FN void write_transposed(const Staged& staged, int64_t N, int64_t K, F* out_t, int64_t tile_row,
                                   int64_t tile_col, int tid) {
  const int c = tid / (kTile / kChunk), r0 = (tid % (kTile / kChunk)) * kChunk;
  const int64_t col = tile_col * kTile + c, row = tile_row * kTile + r0;
  if (col >= K || row >= N) return;  // N holds whole chunks
  Pack<F, kChunk> chunk;
  GPT2_UNROLL
  for (int i = 0; i < kChunk; ++i) chunk.v[i] = F(staged.b[r0 + i][c], F::from_bits());
  store<F, kChunk>(out_t + col * N, row / kChunk, chunk);
}

}  // namespace gpt2::kernels::fp8
