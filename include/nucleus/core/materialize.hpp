// What a row_state becomes at the end of a chain without a draw: the greedy token, or the processed
// distribution (survivors and their probabilities at the current temperature).
#pragma once

#include <limits>

#include "nucleus/core/distribution.hpp"
#include "nucleus/core/result.hpp"
#include "nucleus/core/row_state.hpp"
#include "nucleus/core/stage_info.hpp"
#include "nucleus/simd/targets.hpp"

namespace nucleus {

// The highest candidate, ties to the lowest id (the first one when the candidates are in rank order).
// A chain passes its plan: before any stage that sorts, there is no rank order to test for.
template <row_plan P = row_plan{}>
sample_result greedy_pick(row_state& s, plan<P> = {}) noexcept {
  if (!s.live()) return s.fail();
  if (P.may_be_sorted && s.sorted()) return {s.id(0), 0.0f, status::ok};
  const auto r = s.visit([&](const auto* x) { return detail::argmax(x, s.size()); });
  if (r.index < 0) {
    s.set_status(status::no_candidates);
    return s.fail();
  }
  return {s.id(static_cast<std::size_t>(r.index)), 0.0f, status::ok};
}

// The candidates with their probabilities, written into the workspace (a view valid until its next
// use). Greedy rows give their one token with probability 1.
template <row_plan P = row_plan{}>
distribution materialize(row_state& s, plan<P> = {}) noexcept {
  workspace& ws = s.ws();
  if (P.may_be_greedy && s.greedy()) {
    const sample_result g = greedy_pick(s, plan<P>{});
    if (g.status != status::ok) return {nullptr, nullptr, 0, false, g.status};
    ws.ids.data()[0] = g.token;
    ws.probs.data()[0] = 1.0f;
    return {ws.ids.data(), ws.probs.data(), 1, true, status::ok};
  }
  const float m = s.max_logit();
  if (!s.live()) return {nullptr, nullptr, 0, false, s.fail().status};
  if (s.dense()) s.keep_scaled_at_least(0.0f, 1.0f, -std::numeric_limits<float>::max());
  const float inv = s.inv_temperature();
  const float* v = s.logits();
  const double z = detail::to_double(detail::exp_sum(v, s.size(), m, inv, nullptr));
  float* p = ws.probs.data();
  detail::exp_store(v, s.size(), m, inv, p);
  const auto inv_z = static_cast<float>(1.0 / z);
  for (std::size_t i = 0; i < s.size(); ++i) p[i] *= inv_z;
  return {s.ids_or_null(), p, s.size(), P.may_be_sorted && s.sorted(), status::ok};
}

}  // namespace nucleus
