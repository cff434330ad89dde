// kernels/fp8_tiles.h casts to FP8 on sm_89+ with cvt.rn.satfinite (a pair an instruction), where ATen and the
// CPU use c10's software cast: both must give the same bits for every float a scaled tensor holds (|x| at most
// the format's largest, or NaN). Compares c10's cast with cuda_fp8.h's host emulation of the instruction for all
// 2^32 floats, on two threads. make cuda-check builds and runs it (scripts/fp8_cast_check.sh).
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>

namespace {

// mismatches of format F for the floats with bit patterns [begin, end)
template <typename F>
uint64_t differ(uint64_t begin, uint64_t end, float top, __nv_fp8_interpretation_t kind) {
  uint64_t bad = 0;
  for (uint64_t b = begin; b < end; ++b) {
    const uint32_t u = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &u, 4);
    if (!(std::isnan(f) || std::fabs(f) <= top)) continue;
    const uint8_t c = F(f).x, h = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, kind);
    auto nan = [](uint8_t bits) { return std::isnan(static_cast<float>(F(bits, F::from_bits()))); };
    const bool both_nan = nan(c) && nan(h);  // of either sign
    if (c != h && !both_nan && bad++ < 3) std::printf("  %a: c10 0x%02x, cvt 0x%02x\n", f, c, h);
  }
  return bad;
}

template <typename F>
uint64_t all_floats(const char* name, float top, __nv_fp8_interpretation_t kind) {
  uint64_t low = 0, high = 0;
  std::thread other([&] { high = differ<F>(1ull << 31, 1ull << 32, top, kind); });
  low = differ<F>(0, 1ull << 31, top, kind);
  other.join();
  std::printf("fp8_cast_check: %s: %llu floats cast otherwise than c10 casts them\n", name,
              static_cast<unsigned long long>(low + high));
  return low + high;
}

}  // namespace

int main() {
  const uint64_t bad = all_floats<c10::Float8_e4m3fn>("e4m3", 448.0f, __NV_E4M3) +
                       all_floats<c10::Float8_e5m2>("e5m2", 57344.0f, __NV_E5M2);
  return bad == 0 ? 0 : 1;
}
