// The exp floor with Sleef_expf4_u10advsimd (aarch64, where AdvSIMD is baseline: no flags needed).
#include <cstddef>

#include <sleef.h>

#include "sleef_sum_exp.hpp"

namespace {

struct lanes_advsimd {
  static constexpr std::size_t width = 4;
  static float32x4_t set1(float v) noexcept { return vdupq_n_f32(v); }
  static float32x4_t load(const float* p) noexcept { return vld1q_f32(p); }
  static void store(float* p, float32x4_t v) noexcept { vst1q_f32(p, v); }
  static float32x4_t add(float32x4_t a, float32x4_t b) noexcept { return vaddq_f32(a, b); }
  static float32x4_t sub(float32x4_t a, float32x4_t b) noexcept { return vsubq_f32(a, b); }
  static float32x4_t exp(float32x4_t v) noexcept { return Sleef_expf4_u10advsimd(v); }
};

}  // namespace

namespace nucleus::bench {

float sleef_sum_exp_advsimd(const float* x, std::size_t n, float shift) noexcept {
  return detail::sleef_sum_exp<lanes_advsimd>(x, n, shift);
}

}  // namespace nucleus::bench
