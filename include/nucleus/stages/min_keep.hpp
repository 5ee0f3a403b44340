// min_keep: the floor that truncating stages take as llama.cpp (min_keep) and Hugging Face
// (min_tokens_to_keep) do. A cut that would leave fewer than min_keep candidates keeps the first
// min_keep in rank order instead (all of them if there are fewer); 1 is no floor, since every stage
// keeps the rank-first token anyway. Each stage's exact rule: docs/semantics.md, "min_keep".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "nucleus/core/row_state.hpp"
#include "nucleus/simd/targets.hpp"

namespace nucleus::detail {

// A stage factory's min_keep argument, checked. llama.cpp's 0 ("no floor") is nucleus's 1; 0 itself
// is refused so that a forgotten argument order cannot pass silently.
inline std::size_t checked_min_keep(int min_keep, const char* stage) {
  if (min_keep < 1)
    throw std::invalid_argument(std::string("nucleus::") + stage +
                                ": min_keep must be >= 1 (1 is no floor; llama.cpp's 0 means 1)");
  return static_cast<std::size_t>(min_keep);
}

// The rank key (rank_key) of the min_keep-th candidate in rank order, or 0 when there are no more than
// min_keep candidates (0 ranks below every candidate's key, so "key >= floor" then keeps them all).
// Call after max_logit(): a row holding +inf has been reduced to its +inf tokens by then.
// Never more keys than the candidates (the workspace holds a row's worth): allocation-free.
inline std::uint64_t min_keep_floor(row_state& s, std::size_t min_keep) {
  const std::size_t n = s.size();
  if (min_keep >= n) return 0;  // (a dense row's size counts -inf and NaN too: never fewer)
  if (s.sorted()) return rank_key(s.value(min_keep - 1), s.id(min_keep - 1));
  std::uint64_t* keys = s.ws().keys.ensure(n);
  if (select_capacity(min_keep) <= n) {
    const std::size_t got =
        s.visit([&](const auto* x) { return select_top_k(x, s.ids_or_null(), n, min_keep, keys); });
    return got < min_keep ? 0 : keys[min_keep - 1];
  }
  // A floor near the candidate count: every candidate's key, then one selection.
  const std::size_t m = s.visit([&](const auto* x) {
    std::size_t c = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const float v = to_float(x[i]);
      if (v > -inf()) keys[c++] = rank_key(v, s.id(i));  // (NaN and -inf are no candidates)
    }
    return c;
  });
  if (m <= min_keep) return 0;
  std::nth_element(keys, keys + (min_keep - 1), keys + m, std::greater<>{});
  return keys[min_keep - 1];
}

// Keeps the candidates at or above the floor in rank order, in their order (the maximum stays).
inline void keep_rank_floor(row_state& s, std::uint64_t floor_key) {
  s.keep_if([&](float x, std::int32_t id) { return rank_key(x, id) >= floor_key; });
}

// Hugging Face's floor for the weight cuts (epsilon_cutoff, eta_cutoff): every candidate whose logit
// is >= the min_keep-th largest stays, ties with it included. Returns true when the floor decided the
// set (it has cut, or kept all); false when the cut at w_min (weight units, as keep_weight_at_least
// takes it) keeps the min_keep-th anyway, and so everything above it: then that cut alone applies.
inline bool weight_cut_floored(row_state& s, std::size_t min_keep, double w_min) {
  const std::uint64_t floor_key = min_keep_floor(s, min_keep);
  if (floor_key == 0) return true;
  const float kv = key_value(floor_key);
  const float e = exp_scalar(scaled(kv, s.max_logit(), s.inv_temperature()));
  if (static_cast<double>(e) >= std::ceil(w_min) * detail::weight_ulp) return false;
  s.keep_scaled_at_least(0.0f, 1.0f, kv);
  return true;
}

// The candidates: the set's size, less a dense row's -inf and NaN entries.
inline std::size_t candidate_count(const row_state& s) noexcept {
  if (!s.dense()) return s.size();
  return s.visit([&](const auto* x) { return count_greater(x, s.size(), -inf()); });  // NaN never is
}

}  // namespace nucleus::detail
