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
  static constexpr stage_info info{};

  float n_sigma;  // how many standard deviations below the largest logit; <= 0: disabled

  void apply(row_state& s) const noexcept {
    if (n_sigma <= 0.0f) return;
    const float mx = s.max_logit();
    if (!s.live() || s.size() == 1) return;
    // Two passes in double over eight interleaved partial sums (candidate i goes to sum i % 8, the
    // sums then add in a fixed order), with no contractible multiply-add: the same bits under any
    // compiler flags, and eight independent chains instead of one. The kernels (kernels/reduce.hpp)
    // keep the partial sums in double registers.
    double sum[detail::partial_sums], acc[detail::partial_sums];
    const std::size_t count =
        s.visit([&](const auto* x) { return detail::candidate_sums(x, s.size(), sum); });
    double total = 0.0;
    for (double p : sum) total += p;
    const double mean = total / static_cast<double>(count);
    s.visit([&](const auto* x) { detail::candidate_squares(x, s.size(), mean, acc); });
    double squares = 0.0;
    for (double p : acc) squares += p;
    const double sigma = std::sqrt(squares / static_cast<double>(count));
    const double t = static_cast<double>(mx) - static_cast<double>(n_sigma) * sigma;
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
