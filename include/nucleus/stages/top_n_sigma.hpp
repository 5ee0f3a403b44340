// top_n_sigma(n): keeps the logits within n standard deviations of the largest, x >= max - n * sigma
// (Tang et al.; llama.cpp's top_n_sigma). sigma is the population standard deviation of the
// candidates' logits; a temperature scales max and sigma alike, so the set does not depend on it.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>

#include "nucleus/core/chain.hpp"

namespace nucleus {

struct top_n_sigma_stage : stage<top_n_sigma_stage> {
  static constexpr stage_info info{.truncates = true, .needs_max = true};

  float n;  // <= 0: disabled

  void apply(row_state& s) const noexcept {
    if (n <= 0.0f) return;
    const float mx = s.max_logit();
    if (!s.live() || s.size() == 1) return;
    // Two passes in double, in candidate order, with no contractible multiply-add: the same bits
    // under any compiler flags.
    double sum = 0.0;
    std::size_t count = 0;
    s.visit([&](const auto* x) {
      for (std::size_t i = 0; i < s.size(); ++i) {
        const float v = to_float(x[i]);
        if (v == v && v > -detail::inf()) {
          sum += static_cast<double>(v);
          ++count;
        }
      }
    });
    const double mean = sum / static_cast<double>(count);
    double acc = 0.0;
    s.visit([&](const auto* x) {
      for (std::size_t i = 0; i < s.size(); ++i) {
        const float v = to_float(x[i]);
        if (v == v && v > -detail::inf()) {
          const double d = static_cast<double>(v) - mean;
          acc = std::fma(d, d, acc);
        }
      }
    });
    const double sigma = std::sqrt(acc / static_cast<double>(count));
    const double t = static_cast<double>(mx) - static_cast<double>(n) * sigma;
    // The least float >= t: x >= t and x >= that float agree for every float x.
    float f = static_cast<float>(t);
    if (static_cast<double>(f) < t) f = std::nextafter(f, detail::inf());
    if (f < -std::numeric_limits<float>::max()) f = -std::numeric_limits<float>::max();  // never -inf
    s.keep_scaled_at_least(0.0f, 1.0f, f);
  }
};

inline top_n_sigma_stage top_n_sigma(float n) {
  if (std::isnan(n) || std::isinf(n))
    throw std::invalid_argument("nucleus::top_n_sigma: n must be finite (<= 0 disables)");
  return top_n_sigma_stage{{}, n};
}

}  // namespace nucleus
