// The exp floor with Sleef_expf4_u10sse2 (this file is compiled with the flags of its ISA).
#include <cstddef>

#include <sleef.h>

#include "sleef_sum_exp.hpp"

namespace {

struct lanes_sse2 {
  static constexpr std::size_t width = 4;
  static __m128 set1(float v) noexcept { return _mm_set1_ps(v); }
  static __m128 load(const float* p) noexcept { return _mm_loadu_ps(p); }
  static void store(float* p, __m128 v) noexcept { _mm_storeu_ps(p, v); }
  static __m128 add(__m128 a, __m128 b) noexcept { return _mm_add_ps(a, b); }
  static __m128 sub(__m128 a, __m128 b) noexcept { return _mm_sub_ps(a, b); }
  static __m128 exp(__m128 v) noexcept { return Sleef_expf4_u10sse2(v); }
};

}  // namespace

namespace nucleus::bench {

float sleef_sum_exp_sse2(const float* x, std::size_t n, float shift) noexcept {
  return detail::sleef_sum_exp<lanes_sse2>(x, n, shift);
}

}  // namespace nucleus::bench
