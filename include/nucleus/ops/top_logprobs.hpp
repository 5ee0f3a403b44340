// top_logprobs: the n most likely tokens of the raw row (T = 1) with their log-probabilities, as
// an engine reports them for `logprobs = n`.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>

#include "nucleus/core/result.hpp"
#include "nucleus/core/workspace.hpp"
#include "nucleus/kernels/reduce.hpp"
#include "nucleus/kernels/select.hpp"

namespace nucleus {

// Descending by logprob, ties by ascending id; fewer than n entries when the row has fewer
// candidates (none for an empty or all-NaN/-inf row). A view into ws, valid until its next use.
template <logit_type T>
std::span<const token_logprob> top_logprobs(std::span<const T> logits, std::size_t n, workspace& ws) {
  using namespace detail;
  const std::size_t v = logits.size();
  const std::size_t k = n < v ? n : v;
  if (k == 0) return {};
  std::uint64_t* keys = ws.keys.ensure(select_capacity(k));
  const std::size_t c = select_top_k(logits.data(), nullptr, v, k, keys);
  if (c == 0) return {};
  token_logprob* out = ws.top.ensure(c);
  const float m = key_value(keys[0]);
  if (m == inf()) {
    std::size_t infs = 0;
    for (const T& x : logits) infs += to_float(x) == inf();
    // only the +inf tokens are candidates (docs/semantics.md); they rank first
    const std::size_t shown = c < infs ? c : infs;
    const auto lp = static_cast<float>(-std::log(static_cast<double>(infs)));
    for (std::size_t i = 0; i < shown; ++i) out[i] = {key_id(keys[i]), lp};
    return {out, shown};
  }
  const auto lse_f = static_cast<float>(std::log(exp_sum(logits.data(), v, m, 1.0f, nullptr, block_elems)));
  for (std::size_t i = 0; i < c; ++i) out[i] = {key_id(keys[i]), (key_value(keys[i]) - m) - lse_f};
  return {out, c};
}

inline std::span<const token_logprob> top_logprobs(std::span<const float> logits, std::size_t n,
                                                   workspace& ws) {
  return top_logprobs<float>(logits, n, ws);
}

}  // namespace nucleus
