// log_softmax: stable log-probabilities of a whole row (max subtracted, log-sum-exp).
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>

#include "nucleus/core/result.hpp"
#include "nucleus/ops/normalizer.hpp"
#include "nucleus/simd/targets.hpp"

namespace nucleus {

// out[i] = log softmax(logits)[i]. NaN and -inf logits get -inf. A row holding +inf spreads the
// probability evenly over its +inf tokens. A row with no candidate is all -inf (no_candidates).
// Rows may hold float, bf16 or f16.
template <logit_type T>
status log_softmax(std::span<const T> logits, std::span<float> out) {
  if (logits.empty()) throw std::invalid_argument("nucleus::log_softmax: empty row");
  if (out.size() != logits.size())
    throw std::invalid_argument("nucleus::log_softmax: out.size() must equal logits.size()");
  using namespace detail;
  const T* x = logits.data();
  const std::size_t n = logits.size();
  const raw_normalizer norm = normalizer_for(x, n, max_value(x, n));
  if (norm.no_candidates()) {
    for (float& o : out) o = -inf();
    return status::no_candidates;
  }
  if (norm.max < inf()) {
    log_softmax_store(x, n, norm.max, norm.lse, out.data());
  } else {
    for (std::size_t i = 0; i < n; ++i) out[i] = norm(to_float(x[i]));
  }
  return status::ok;
}

inline status log_softmax(std::span<const float> logits, std::span<float> out) {
  return log_softmax<float>(logits, out);
}

}  // namespace nucleus
