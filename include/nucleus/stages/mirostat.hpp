// mirostat(tau, eta, mu) and mirostat_v2(tau, eta, mu): perplexity-controlled sampling (Basu et al.;
// llama.cpp's mirostat 1 and 2). Terminals: each truncates, draws, then moves mu toward the target
// surprise tau:  mu <- mu - eta * (-log2 p(token) - tau),  p over the survivors.
//   v2 keeps the tokens with surprise -log2 p <= mu (at least the most likely one).
//   v1 estimates the Zipf exponent s from the m most likely tokens and keeps the top
//      k = ((s - 1) 2^mu / (1 - V^(1 - s)))^(1 / s) (at least 1), V the row's length.
// mu is the caller's: request state the draw reads and updates, so rows never share it (batches stay
// invariant). Start it at 2 * tau (mirostat_initial_mu).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <string>

#include "nucleus/core/chain.hpp"
#include "nucleus/core/row_stats.hpp"
#include "nucleus/stages/categorical.hpp"
#include "nucleus/stages/top_k.hpp"

namespace nucleus {

// Mirostat 1.0 estimates its exponent from the top m tokens; llama.cpp's sampler and the engine
// presets use m = 100.
inline constexpr int mirostat_v1_tokens = 100;

inline float mirostat_initial_mu(float tau) noexcept {
  return 2.0f * tau;
}

namespace detail {

// The draw over the survivors, then the update of mu from the token's surprise in bits.
inline sample_result mirostat_draw(row_state& s, draw_key key, float tau, float eta, float* mu) noexcept {
  const sample_result r = draw(s, key);
  if (r.status != status::ok) return r;
  const double surprise = -static_cast<double>(r.logprob) / std::log(2.0);
  *mu = static_cast<float>(static_cast<double>(*mu) -
                           static_cast<double>(eta) * (surprise - static_cast<double>(tau)));
  return r;
}

inline void mirostat_check(const char* who, float tau, float eta) {
  if (!(tau >= 0.0f) || std::isinf(tau))
    throw std::invalid_argument(std::string("nucleus::") + who + ": tau must be finite and >= 0");
  if (!(eta >= 0.0f) || std::isinf(eta))
    throw std::invalid_argument(std::string("nucleus::") + who + ": eta must be finite and >= 0");
}

}  // namespace detail

struct mirostat_v2_stage : stage<mirostat_v2_stage> {
  static constexpr stage_info info{.terminal = true, .needs_key = true};

  float tau, eta;
  float* mu;

  // Keeps the tokens with -log2 p <= mu: w_i >= total * 2^-mu on the exact weights. If not even the
  // most likely token qualifies, it alone is kept (ties to the lowest id).
  void truncate(row_state& s) const noexcept {
    const float mx = s.max_logit();
    if (!s.live() || s.greedy()) return;
    const float inv = s.inv_temperature();
    const detail::wsum total =
        s.visit([&](const auto* x) { return detail::exp_sum(x, s.size(), mx, inv, nullptr); });
    const double w_min = std::exp2(-static_cast<double>(*mu)) * static_cast<double>(total);
    if (!(detail::weight_of_one >= w_min)) {  // the maximum weighs 2^48
      top_k_stage{{}, 1, ties::exact}.apply(s);
      return;
    }
    detail::keep_weight_at_least(s, w_min);
  }

  sample_result finish(row_state& s, draw_key key) const noexcept {
    truncate(s);
    return detail::mirostat_draw(s, key, tau, eta, mu);
  }
};

struct mirostat_v1_stage : stage<mirostat_v1_stage> {
  static constexpr stage_info info{.terminal = true, .needs_key = true};

  float tau, eta;
  int tokens;  // m, the top tokens the exponent is estimated from (llama.cpp: 100)
  float* mu;

  // The top-k the estimate asks for (>= 1; the whole row when the estimate is not a number).
  std::size_t k_for(row_state& s, std::size_t vocab) const {
    const float mx = s.max_logit();
    const std::size_t n = s.size();
    const std::size_t take = std::min(n, static_cast<std::size_t>(tokens));
    std::uint64_t* keys = s.ws().keys.ensure(detail::select_capacity(take));
    const std::size_t got =
        s.visit([&](const auto* x) { return detail::select_top_k(x, s.ids_or_null(), n, take, keys); });
    const float inv = s.inv_temperature();
    // log(p_i / p_(i+1)) is the difference of scaled logits; sums in order, no contractible multiply-add.
    double sum_tb = 0.0, sum_tt = 0.0;
    for (std::size_t i = 0; i + 1 < got; ++i) {
      const double t = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
      const double b = static_cast<double>(detail::scaled(detail::key_value(keys[i]), mx, inv)) -
                       static_cast<double>(detail::scaled(detail::key_value(keys[i + 1]), mx, inv));
      sum_tb = std::fma(t, b, sum_tb);
      sum_tt = std::fma(t, t, sum_tt);
    }
    const double s_hat = sum_tb / sum_tt;
    const double e_hat = s_hat - 1.0;
    const double k = std::pow(
        e_hat * std::exp2(static_cast<double>(*mu)) / (1.0 - std::pow(static_cast<double>(vocab), -e_hat)),
        1.0 / s_hat);
    if (!(k < static_cast<double>(n))) return n;  // also NaN
    return k >= 1.0 ? static_cast<std::size_t>(k) : 1;
  }

  // Keeps the top k_for() candidates (ties to the lower id), V = the row's length.
  void truncate(row_state& s) const {
    s.max_logit();
    if (!s.live() || s.greedy() || s.size() < 2) return;
    const std::size_t k = k_for(s, s.row_size());
    top_k_stage{{}, static_cast<int>(std::min<std::size_t>(k, 0x7FFFFFFF)), ties::exact}.apply(s);
  }

  sample_result finish(row_state& s, draw_key key) const {
    truncate(s);
    return detail::mirostat_draw(s, key, tau, eta, mu);
  }
};

inline mirostat_v2_stage mirostat_v2(float tau, float eta, float& mu) {
  detail::mirostat_check("mirostat_v2", tau, eta);
  return mirostat_v2_stage{{}, tau, eta, &mu};
}

inline mirostat_v1_stage mirostat(float tau, float eta, float& mu, int m = mirostat_v1_tokens) {
  detail::mirostat_check("mirostat", tau, eta);
  if (m < 1) throw std::invalid_argument("nucleus::mirostat: m must be >= 1");
  return mirostat_v1_stage{{}, tau, eta, m, &mu};
}

}  // namespace nucleus
