// defines: FP8 quantization into both layouts at once, as the CUDA kernel (kernels/cuda/fp8_quantize.cu) does it,
//          tile by tile and thread by thread: plain C++ on the host too, where the CPU tests run every (tile,
//          thread) against ATen's divide-then-transposed-copy. at::_scaled_mm takes its operands K-major only, so
//          FP8's backward needs x, w and the gradient transposed as well (Transformer Engine's cast_transpose).
//
// A block quantizes a tile of kTile × kTile elements of t (N × K, row-major): each thread reads 16-byte packs,
// divides each element by the inverse scale in fp32 and casts it to F (ATen's own arithmetic: the same bits),
// writes them row-major and stages their bytes; after the block's barrier each thread writes 16 bytes of the
// tile's transpose (K × N). The caller guarantees K % kPack<T> == 0, N % 16 == 0 and 16-byte aligned pointers.
// No libtorch here: T is float, c10::Half or c10::BFloat16; F c10::Float8_e4m3fn or c10::Float8_e5m2.
#pragma once
#include <cstdint>

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

// Phase one for thread `tid` of tile (tile_row, tile_col): its packs of t quantized, written row-major, staged.
template <typename T, typename F>
GPT2_LANE_FN void quantize_rows(const T* t, int64_t N, int64_t K, float inverse_scale, F* out, Staged& staged,
                                int64_t tile_row, int64_t tile_col, int tid) {
  constexpr int kVec = kPack<T>, kPacksPerRow = kTile / kVec;
  for (int p = tid; p < kTile * kPacksPerRow; p += kThreads) {
    const int r = p / kPacksPerRow, c = (p % kPacksPerRow) * kVec;
    const int64_t row = tile_row * kTile + r, col = tile_col * kTile + c;
    if (row >= N || col >= K) continue;  // K holds whole packs
    const Pack<T, kVec> in = load<T, kVec>(t + row * K, col / kVec);
    Pack<F, kVec> q;
    GPT2_UNROLL
    for (int k = 0; k < kVec; ++k) {
      q.v[k] = static_cast<F>(static_cast<float>(in.v[k]) / inverse_scale);
      staged.b[r][c + k] = q.v[k].x;
    }
    store<F, kVec>(out + row * K, col / kVec, q);
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
