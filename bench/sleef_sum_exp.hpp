// The exp floor's one body, included by sleef_sum_exp_<isa>.cpp, each compiled for its own ISA.
//
// Only those files include this: it is instantiated with a vector type from an anonymous namespace,
// so no function compiled with AVX-512 flags can be shared with (and picked by the linker for) code
// that must run without them.
#pragma once

#include <cstddef>
#include <cstring>
#include <limits>

namespace nucleus::bench::detail {

// sum(exp(x[i] - shift)) with SLEEF's u10 expf, `V::width` lanes a call, four calls in flight; the
// tail is padded with -inf, whose exp is 0.
template <class V>
float sleef_sum_exp(const float* x, std::size_t n, float shift) noexcept {
  constexpr std::size_t w = V::width;
  const auto s = V::set1(shift);
  auto a0 = V::set1(0.0f), a1 = a0, a2 = a0, a3 = a0;
  std::size_t i = 0;
  for (; i + 4 * w <= n; i += 4 * w) {
    a0 = V::add(a0, V::exp(V::sub(V::load(x + i), s)));
    a1 = V::add(a1, V::exp(V::sub(V::load(x + i + w), s)));
    a2 = V::add(a2, V::exp(V::sub(V::load(x + i + 2 * w), s)));
    a3 = V::add(a3, V::exp(V::sub(V::load(x + i + 3 * w), s)));
  }
  for (; i + w <= n; i += w) a0 = V::add(a0, V::exp(V::sub(V::load(x + i), s)));
  if (i < n) {
    float tail[w];
    for (float& t : tail) t = -std::numeric_limits<float>::infinity();
    std::memcpy(tail, x + i, (n - i) * sizeof(float));
    a1 = V::add(a1, V::exp(V::sub(V::load(tail), s)));
  }
  float lanes[w];
  V::store(lanes, V::add(V::add(a0, a1), V::add(a2, a3)));
  float sum = 0.0f;
  for (float l : lanes) sum += l;
  return sum;
}

}  // namespace nucleus::bench::detail
