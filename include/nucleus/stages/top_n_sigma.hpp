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

  float n;  // <= 0: disabled

  void apply(row_state& s) const noexcept {
    if (n <= 0.0f) return;
    const float mx = s.max_logit();
    if (!s.live() || s.size() == 1) return;
    // Two passes in double over eight interleaved partial sums (candidate i goes to sum i % 8, the
    // sums then add in a fixed order), with no contractible multiply-add: the same bits under any
    // compiler flags, and eight independent chains instead of one.
    constexpr std::size_t lanes = 8;
    double sum[lanes] = {}, acc[lanes] = {};
    std::size_t count = 0;
    // A candidate is neither -inf nor NaN: one compare, false for both.
    auto candidate = [](float v) { return v > -detail::inf(); };
    // Each pass runs eight candidates at a time, candidate i + j into sum j: the sums stay in
    // registers (one vector where the compiler vectorizes), and each adds in the order of i.
    const std::size_t len = s.size(), whole = len - len % lanes;
    auto add = [&](float v, std::size_t j) {
      const bool c = candidate(v);
      sum[j] += static_cast<double>(c ? v : 0.0f);
      count += c;
    };
    s.visit([&](const auto* x) {
      for (std::size_t i = 0; i < whole; i += lanes)
        for (std::size_t j = 0; j < lanes; ++j) add(to_float(x[i + j]), j);
      for (std::size_t j = 0; whole + j < len; ++j) add(to_float(x[whole + j]), j);
    });
    double total = 0.0;
    for (double p : sum) total += p;
    const double mean = total / static_cast<double>(count);
    auto square = [&](float v, std::size_t j) {
      const double d = static_cast<double>(candidate(v) ? v : 0.0f) - (candidate(v) ? mean : 0.0);
      acc[j] = std::fma(d, d, acc[j]);
    };
    s.visit([&](const auto* x) {
      for (std::size_t i = 0; i < whole; i += lanes)
        for (std::size_t j = 0; j < lanes; ++j) square(to_float(x[i + j]), j);
      for (std::size_t j = 0; whole + j < len; ++j) square(to_float(x[whole + j]), j);
    });
    double squares = 0.0;
    for (double p : acc) squares += p;
    const double sigma = std::sqrt(squares / static_cast<double>(count));
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
