// The raw (T = 1) log-softmax of a row as a function of one logit, shared by log_softmax,
// top_logprobs, logprobs_of and the engine's raw logprobs, so all of them follow one set of rules
// (docs/semantics.md) and give the same bits for the same token.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

#include "nucleus/core/logit_types.hpp"
#include "nucleus/simd/targets.hpp"

namespace nucleus::detail {

struct raw_normalizer {
  float max = -inf();   // the row's largest logit; -inf: no candidate
  float lse = 0.0f;     // log of the exp-sum below max (finite max)
  float inf_lp = 0.0f;  // -log(number of +inf logits) (max == +inf)

  bool no_candidates() const noexcept { return !(max > -inf()); }

  // log softmax(row)[token] for a token whose logit is x. NaN and -inf give -inf; with +inf in the
  // row its +inf tokens share the mass.
  float operator()(float x) const noexcept {
    if (!(x == x) || no_candidates()) return -inf();
    if (max == inf()) return x == inf() ? inf_lp : -inf();
    return (x - max) - lse;
  }
};

// One more pass over the row, given its maximum m: the exp-sum, or the count of +inf logits.
template <logit_type T>
raw_normalizer normalizer_for(const T* x, std::size_t n, float m) noexcept {
  raw_normalizer r;
  r.max = m;
  if (m == inf()) {
    const std::size_t infs = count_greater(x, n, std::numeric_limits<float>::max());
    r.inf_lp = static_cast<float>(-std::log(static_cast<double>(infs)));
  } else if (m > -inf()) {
    r.lse = static_cast<float>(std::log(to_double(exp_sum(x, n, m, 1.0f, nullptr))));
  }
  return r;
}

}  // namespace nucleus::detail
