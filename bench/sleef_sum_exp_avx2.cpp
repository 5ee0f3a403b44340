// The exp floor with Sleef_expf8_u10avx2 (this file is compiled with the flags of its ISA).
#include <cstddef>

#include <sleef.h>

#include "sleef_sum_exp.hpp"

namespace {

struct lanes_avx2 {
  static constexpr std::size_t width = 8;
  static __m256 set1(float v) noexcept { return _mm256_set1_ps(v); }
  static __m256 load(const float* p) noexcept { return _mm256_loadu_ps(p); }
  static void store(float* p, __m256 v) noexcept { _mm256_storeu_ps(p, v); }
  static __m256 add(__m256 a, __m256 b) noexcept { return _mm256_add_ps(a, b); }
  static __m256 sub(__m256 a, __m256 b) noexcept { return _mm256_sub_ps(a, b); }
  static __m256 exp(__m256 v) noexcept { return Sleef_expf8_u10avx2(v); }
};

}  // namespace

namespace nucleus::bench {

float sleef_sum_exp_avx2(const float* x, std::size_t n, float shift) noexcept {
  return detail::sleef_sum_exp<lanes_avx2>(x, n, shift);
}

}  // namespace nucleus::bench
