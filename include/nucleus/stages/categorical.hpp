// categorical(): one draw from the processed distribution, keyed by draw_key{seed, position}.
#pragma once

#include <cmath>
#include <optional>

#include "nucleus/core/chain.hpp"
#include "nucleus/core/materialize.hpp"

namespace nucleus {

// A categorical draw over the candidates' exact weights (simd/scalar.hpp): the token whose run of the
// cumulative weight, in candidate order, holds the key's point in [0, total). Greedy rows (T = 0) give
// their argmax. Records the normalizer (row_state::draw_sum) for logprobs.
// Only a row after a stage that tempers can be greedy (the chain's plan).
template <row_plan P = row_plan{}>
sample_result draw(row_state& s, draw_key key, plan<P> = {}) noexcept {
  if (P.may_be_greedy && s.greedy()) return greedy_pick(s, plan<P>{});
  const float mx = s.max_logit();
  if (!s.live()) return s.fail();
  const float inv = s.inv_temperature();
  workspace& ws = s.ws();
  // A pending window (core/row_state.hpp) is read in place: the logits outside it weigh 0, so the
  // total and the running sums are those of the compacted candidates, in the same order.
  const bool window = s.window_pending();
  const float lo = s.window_lo(), hi = s.window_hi();
  // A stage that stored the row's exp values may have lent them: then no exp is recomputed.
  const std::size_t n = s.stored_size();
  const float* e = s.lent_exps();
  std::uint64_t* blocks = ws.blocks.data();
  const std::optional<detail::wsum> ready = s.lent_total();  // (blocks already written)
  const detail::wsum w = ready ? *ready : s.visit_stored([&](const auto* x) {
    if (!window) return detail::exp_sum(x, n, mx, inv, blocks);
    return e ? detail::cached_sum_in(x, e, n, lo, hi, blocks)
             : detail::exp_sum_in(x, n, mx, inv, lo, hi, blocks);
  });
  s.set_draw_sum(detail::to_double(w));
  const detail::wsum point = detail::draw_point(key, w);
  const auto i = s.visit_stored([&](const auto* x) {
    float* scratch = ws.block_scratch.data();
    if (!window) return detail::pick(x, n, mx, inv, blocks, point, scratch);
    return e ? detail::cached_pick_in(x, e, n, lo, hi, blocks, point)
             : detail::pick_in(x, n, mx, inv, lo, hi, blocks, point, scratch);
  });
  if (i < 0) {  // the total was 0: not reachable (the maximum weighs 2^48), kept as a guard
    s.set_status(status::no_candidates);
    return s.fail();
  }
  // (while windowed the row is dense: the index is the id)
  const auto at = static_cast<std::size_t>(i);
  const float y =
      window ? detail::scaled(s.visit_stored([&](const auto* x) { return to_float(x[at]); }), mx, inv)
             : s.scaled(at);
  return {window ? static_cast<std::int32_t>(at) : s.id(at),
          static_cast<float>(static_cast<double>(y) - std::log(s.draw_sum())), status::ok};
}

struct categorical_stage : stage<categorical_stage> {
  static constexpr stage_info info{.terminal = true, .needs_key = true};

  sample_result finish(row_state& s, draw_key key) const noexcept { return draw(s, key); }
  template <row_plan P>
  sample_result finish(row_state& s, draw_key key, plan<P>) const noexcept {
    return draw(s, key, plan<P>{});
  }
};

inline categorical_stage categorical() noexcept {
  return {};
}

}  // namespace nucleus
