// top_logprobs: the n most likely tokens of the raw row (T = 1) with their log-probabilities, as
// an engine reports them for `logprobs = n`.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>

#include "nucleus/core/result.hpp"
#include "nucleus/core/workspace.hpp"
#include "nucleus/ops/normalizer.hpp"
#include "nucleus/simd/targets.hpp"

namespace nucleus {

namespace detail {

// The k most likely tokens of x at T = 1 into out (rank order), from one selection pass and one
// normalizer pass (the selection already knows the maximum). keys holds select_capacity(k). Returns
// the count written; *norm (when given) receives the row's normalizer.
template <logit_type T>
std::size_t top_raw_logprobs(const T* x, std::size_t n, std::size_t k, std::uint64_t* keys,
                             token_logprob* out, raw_normalizer* norm = nullptr) {
  const std::size_t c = k == 0 ? 0 : select_top_k(x, nullptr, n, k, keys);
  const raw_normalizer z = c == 0 ? raw_normalizer{} : normalizer_for(x, n, key_value(keys[0]));
  if (norm) *norm = z;
  std::size_t shown = 0;
  for (; shown < c; ++shown) {
    const float lp = z(key_value(keys[shown]));
    if (z.max == inf() && lp == -inf()) break;  // with +inf in the row only the +inf tokens count
    out[shown] = {key_id(keys[shown]), lp};
  }
  return shown;
}

}  // namespace detail

// Descending by logprob, ties by ascending id; fewer than n entries when the row has fewer
// candidates (none for an empty or all-NaN/-inf row). A view into ws, valid until its next use.
template <logit_type T>
std::span<const token_logprob> top_logprobs(std::span<const T> logits, std::size_t n, workspace& ws) {
  using namespace detail;
  const std::size_t k = n < logits.size() ? n : logits.size();
  token_logprob* out = ws.top.ensure(k);
  return {out, top_raw_logprobs(logits.data(), logits.size(), k, ws.keys.ensure(select_capacity(k)), out)};
}

inline std::span<const token_logprob> top_logprobs(std::span<const float> logits, std::size_t n,
                                                   workspace& ws) {
  return top_logprobs<float>(logits, n, ws);
}

}  // namespace nucleus
