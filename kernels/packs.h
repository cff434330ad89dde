// defines: Pack, load, store, mul_rn, scaled, GPT2_LANE_FN, GPT2_UNROLL, GPT2_NO_UNROLL — what our CUDA kernels' per-thread bodies are
//          written with so that they are plain C++ on the host too, where the CPU tests run them: kVec elements of T
//          moved as one (16 bytes for kVec = 16 / sizeof(T), a single vector instruction on the GPU; one
//          element for kVec = 1). No libtorch here: T is float, c10::Half or c10::BFloat16.
#pragma once
#include <cstdint>
#include <cstring>
#include <initializer_list>

#if defined(__CUDACC__)
#define GPT2_LANE_FN __host__ __device__ __forceinline__
#define GPT2_UNROLL _Pragma("unroll")
#define GPT2_NO_UNROLL _Pragma("unroll 1")
#else
#define GPT2_LANE_FN inline
#define GPT2_UNROLL  // GCC does not know nvcc's pragma (and unrolls what -O3 finds worth it)
#define GPT2_NO_UNROLL
#endif

namespace gpt2::kernels {

template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

template <typename T>
constexpr int kPack = 16 / sizeof(T);  // elements of T in 16 bytes: the kVec of a full pack

// Whether rows of n elements of T can be read in 16-byte packs: n holds whole packs and every pointer (a row
// start; the other rows then are too) is 16-byte aligned. Else a kernel takes one element at a time.
template <typename T>
bool packable(int64_t n, std::initializer_list<const void*> ptrs) {
  if (n % kPack<T> != 0) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// a·b rounded on its own: nvcc would fuse it with an add that follows into one FMA (one rounding), where the ATen
// references round the product first (a multiply kernel, then an add kernel).
GPT2_LANE_FN float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

// Pack p of a row (elements p·kVec .. p·kVec + kVec - 1); the row must be aligned to the pack. A single vector
// load or store on the GPU; through memcpy on the host, where reading T objects as a Pack would break C++'s
// aliasing rules.
template <typename T, int kVec>
GPT2_LANE_FN Pack<T, kVec> load(const T* row, int64_t p) {
#if defined(__CUDA_ARCH__)
  return reinterpret_cast<const Pack<T, kVec>*>(row)[p];
#else
  Pack<T, kVec> out;
  std::memcpy(&out, row + p * kVec, sizeof(out));
  return out;
#endif
}
template <typename T, int kVec>
GPT2_LANE_FN void store(T* row, int64_t p, const Pack<T, kVec>& v) {
#if defined(__CUDA_ARCH__)
  reinterpret_cast<Pack<T, kVec>*>(row)[p] = v;
#else
  std::memcpy(row + p * kVec, &v, sizeof(v));
#endif
}

// A pack of In times s in fp32, each product rounded once into T: what ATen's multiply by a one-element fp32
// tensor makes (kernels/classifier.h, scaled_gradient).
template <typename T, int kVec, typename In>
GPT2_LANE_FN Pack<T, kVec> scaled(const Pack<In, kVec>& in, float s) {
  Pack<T, kVec> out;
  GPT2_UNROLL
  for (int k = 0; k < kVec; ++k) out.v[k] = static_cast<T>(mul_rn(static_cast<float>(in.v[k]), s));
  return out;
}

}  // namespace gpt2::kernels
