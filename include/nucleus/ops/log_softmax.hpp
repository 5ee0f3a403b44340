// log_softmax: stable log-probabilities of a whole row (max subtracted, log-sum-exp).
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <stdexcept>

#include "nucleus/core/result.hpp"
#include "nucleus/kernels/reduce.hpp"
#include "nucleus/ops/normalizer.hpp"

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
  std::size_t i = 0;
  if (norm.max < inf()) {  // norm(x) over packs: (x - max) - lse, NaN -> -inf
    const fpack mv = splat(norm.max), lv = splat(norm.lse), ninf = splat(-inf());
    // (x - max) is exact near the maximum, so the likely tokens keep full precision.
    for (; i + lanes <= n; i += lanes) {
      const fpack v = load(x + i);
      store(out.data() + i, select(eq(v, v), sub(sub(v, mv), lv), ninf));
    }
  }
  for (; i < n; ++i) out[i] = norm(to_float(x[i]));
  return status::ok;
}

inline status log_softmax(std::span<const float> logits, std::span<float> out) {
  return log_softmax<float>(logits, out);
}

}  // namespace nucleus
