// The exp floor with Sleef_expf16_u10avx512f (this file is compiled with the flags of its ISA).
#include <cstddef>

#include <sleef.h>

#include "sleef_sum_exp.hpp"

namespace {

struct lanes_avx512 {
  static constexpr std::size_t width = 16;
  static __m512 set1(float v) noexcept { return _mm512_set1_ps(v); }
  static __m512 load(const float* p) noexcept { return _mm512_loadu_ps(p); }
  static void store(float* p, __m512 v) noexcept { _mm512_storeu_ps(p, v); }
  static __m512 add(__m512 a, __m512 b) noexcept { return _mm512_add_ps(a, b); }
  static __m512 sub(__m512 a, __m512 b) noexcept { return _mm512_sub_ps(a, b); }
  static __m512 exp(__m512 v) noexcept { return Sleef_expf16_u10avx512f(v); }
};

}  // namespace

namespace nucleus::bench {

float sleef_sum_exp_avx512(const float* x, std::size_t n, float shift) noexcept {
  return detail::sleef_sum_exp<lanes_avx512>(x, n, shift);
}

}  // namespace nucleus::bench
