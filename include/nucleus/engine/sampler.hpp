// One request's sampler: its knobs compiled into a processor pass and a stage chain in an engine's
// order. Semantics: docs/semantics.md, "Engine layer".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <variant>

#include "nucleus/core/chain.hpp"
#include "nucleus/core/logit_types.hpp"
#include "nucleus/engine/knobs.hpp"
#include "nucleus/engine/processors.hpp"
#include "nucleus/ops/top_logprobs.hpp"
#include "nucleus/simd/targets.hpp"
#include "nucleus/stages/categorical.hpp"
#include "nucleus/stages/dynamic_temperature.hpp"
#include "nucleus/stages/epsilon_cutoff.hpp"
#include "nucleus/stages/eta_cutoff.hpp"
#include "nucleus/stages/min_p.hpp"
#include "nucleus/stages/mirostat.hpp"
#include "nucleus/stages/temperature.hpp"
#include "nucleus/stages/top_k.hpp"
#include "nucleus/stages/top_n_sigma.hpp"
#include "nucleus/stages/top_p.hpp"
#include "nucleus/stages/typical.hpp"
#include "nucleus/stages/xtc.hpp"

namespace nucleus {

// What changes from step to step for one row. The spans are the caller's; nothing is kept.
struct row_request {
  std::span<const std::int32_t> prompt;    // the prompt's tokens (repetition penalty)
  std::span<const std::int32_t> output;    // tokens generated so far (penalties, min_tokens)
  std::span<const std::uint32_t> bitmask;  // optional: ceil(V / 32) words, bit i set = token i allowed
  std::uint64_t position = 0;              // the draw key's position: the index of this token
  float* mirostat_mu = nullptr;            // mirostat's mu, owned by the request (start: 2 * tau);
                                           // required when params.mirostat != 0, updated by the draw
  std::uint64_t stream = 0;                // the sample's index among a request's n (draw_key::stream)
  // This request's own seed, in place of params.seed: one sampler serves requests that each bring a
  // seed, and draws what a sampler built with that seed draws. Unset: params.seed.
  std::optional<std::uint64_t> seed = std::nullopt;
};

// The draw key of a request: its seed (or the params' seed), its position and its stream.
inline draw_key key_of(const row_request& rq, std::uint64_t params_seed) noexcept {
  return draw_key{rq.seed.value_or(params_seed), rq.position, rq.stream};
}

struct row_result {
  std::int32_t token = -1;      // -1 unless status == ok
  float logprob = 0.0f;         // the token's log-probability in the params' logprobs_mode
                                // (with logprobs = -1: in the processed distribution, free)
  std::int32_t rank = 0;        // 1 + tokens with a strictly larger logit there (0 unless ok and
                                // logprobs >= 0)
  std::uint32_t top_count = 0;  // entries written to the top-n span
  nucleus::status status = nucleus::status::ok;

  friend bool operator==(const row_result&, const row_result&) = default;
};

namespace detail {
// The stage each slot of an engine order holds (engine/orders.hpp), made from a request's knobs.
// min_keep goes to every truncation stage of the order (vLLM's validation leaves it at 1).
template <slot S>
struct stage_at;
template <>
struct stage_at<slot::temp> {
  static temperature_stage make(const sampling_params& p, const engine_order_info& e) {
    return {{}, chain_temperature(e.order, p.temperature)};
  }
};
template <>
struct stage_at<slot::dyn> {
  static dynamic_temperature_stage make(const sampling_params& p, const engine_order_info& e) {
    return {{}, chain_temperature(e.order, p.temperature), p.dynatemp_range, p.dynatemp_exponent};
  }
};
template <>
struct stage_at<slot::sigma> {
  static top_n_sigma_stage make(const sampling_params& p, const engine_order_info&) {
    return {{}, p.top_n_sigma};
  }
};
template <>
struct stage_at<slot::top_k> {
  static top_k_stage make(const sampling_params& p, const engine_order_info& e) {
    const int k = e.top_k_min_keep && p.top_k > 0 ? std::max(p.top_k, p.min_keep) : p.top_k;
    return {{}, k, e.top_k_ties};
  }
};
template <>
struct stage_at<slot::typical> {
  static typical_stage make(const sampling_params& p, const engine_order_info&) {
    return {{}, p.typical_p, static_cast<std::size_t>(p.min_keep)};
  }
};
template <>
struct stage_at<slot::top_p> {
  static top_p_stage make(const sampling_params& p, const engine_order_info&) {
    return {{}, p.top_p, static_cast<std::size_t>(p.min_keep)};
  }
};
template <>
struct stage_at<slot::min_p> {
  static min_p_stage make(const sampling_params& p, const engine_order_info&) {
    return {{}, p.min_p, static_cast<std::size_t>(p.min_keep)};
  }
};
template <>
struct stage_at<slot::eps> {
  static epsilon_cutoff_stage make(const sampling_params& p, const engine_order_info&) {
    return {{}, p.epsilon_cutoff, static_cast<std::size_t>(p.min_keep)};
  }
};
template <>
struct stage_at<slot::eta> {
  static eta_cutoff_stage make(const sampling_params& p, const engine_order_info&) {
    return {{}, p.eta_cutoff, static_cast<std::size_t>(p.min_keep)};
  }
};
template <>
struct stage_at<slot::xtc> {
  static xtc_stage make(const sampling_params& p, const engine_order_info&) {
    return {{}, p.xtc_probability, p.xtc_threshold, static_cast<std::size_t>(p.min_keep)};
  }
};

// An engine's chain type: its order's stages, then the categorical draw.
template <engine_order O, std::size_t... I>
auto engine_chain_of(std::index_sequence<I...>)
    -> chain<decltype(stage_at<order_info(O).slots[I]>::make(std::declval<const sampling_params&>(),
                                                             order_info(O)))...,
             categorical_stage>;
template <engine_order O>
using engine_chain = decltype(engine_chain_of<O>(std::make_index_sequence<order_info(O).size>{}));

}  // namespace detail

class sampler {
 public:
  // Throws std::invalid_argument naming the first bad field of p.
  explicit sampler(sampling_params p, engine_order order = engine_order::nucleus)
      : params_(std::move(p)), order_(order), chain_(make_chain(params_, order)), procs_(params_, order) {}

  // The chain of stages this sampler runs (one engine order's, made from params()), and its
  // processors: what a sampler over split rows (nucleus/sharded) runs on its parts.
  using any_chain =
      std::variant<detail::engine_chain<engine_order::nucleus>, detail::engine_chain<engine_order::vllm>,
                   detail::engine_chain<engine_order::hf>, detail::engine_chain<engine_order::llama_cpp>>;
  const any_chain& chain() const noexcept { return chain_; }
  const detail::processors& processors() const noexcept { return procs_; }

  const sampling_params& params() const noexcept { return params_; }
  engine_order order() const noexcept { return order_; }
  // How many top-n entries a row of this sampler writes at most (params().logprobs, or 0).
  std::size_t top_n() const noexcept {
    return params_.logprobs > 0 ? static_cast<std::size_t>(params_.logprobs) : 0;
  }
  // Rank keys a row of `vocab` logits may need beyond a full row's (workspace::keys), for batch
  // code that sizes workspaces up front. A selection never takes more than the row, so a huge top_k
  // (a client's request) costs no more than k = V.
  std::size_t key_capacity(std::size_t vocab = std::numeric_limits<std::size_t>::max()) const noexcept {
    std::size_t k = params_.top_k > 0 ? static_cast<std::size_t>(params_.top_k) : 0;
    if (params_.mirostat == 1)
      k = std::max<std::size_t>(k, mirostat_v1_tokens);  // mirostat 1 reads its top m
    return detail::select_capacity(std::min(std::max(k, top_n()), vocab));
  }

  // Samples one row. `top` receives params().logprobs entries at most (fewer if it is shorter).
  template <logit_type T>
  row_result sample(std::span<const T> row, workspace& ws, const row_request& rq,
                    std::span<token_logprob> top = {}) const {
    if (row.empty()) return {.status = status::empty_row};
    if (!procs_.fits(row.size(), rq)) return {.status = status::invalid_input};
    if (params_.mirostat != 0 && rq.mirostat_mu == nullptr) return {.status = status::invalid_input};
    return with_row(row, ws, rq, [&](auto x) {
      if (params_.mirostat == 1)
        return run(temperature_stage{{}, params_.temperature} | mirostat_v1(rq), x, row, ws, rq, top);
      if (params_.mirostat == 2)
        return run(temperature_stage{{}, params_.temperature} | mirostat_v2(rq), x, row, ws, rq, top);
      return std::visit([&](const auto& c) { return run(c, x, row, ws, rq, top); }, chain_);
    });
  }

  // The processed distribution (processors and stages, no draw), as a chain without a terminal
  // returns it. A view into ws. invalid_input gives an empty distribution with that status.
  template <logit_type T>
  distribution process(std::span<const T> row, workspace& ws, const row_request& rq) const {
    distribution d;
    const status st = with_processed(row, ws, rq, [&](row_state& s) { d = materialize(s); });
    return st == status::ok ? d : distribution(nullptr, nullptr, 0, false, st);
  }

  // The replay a trainer needs: out[i] = tokens[i]'s logprob in the distribution the draw used, by
  // the draw's own formula (the scaled logit less the log of the exact weight sum), so the drawn
  // token's entry is sample()'s processed logprob bit for bit; a greedy row gives its token 0. A
  // token outside the distribution (or with probability 0 in it) gets -inf, and so does every token
  // of a row that fails. Returns that distribution (a view into ws), whose ids with a positive
  // probability are the kept set. out.size() == tokens.size(); ids must be in [0, row.size()).
  template <logit_type T>
  distribution processed_logprobs_of(std::span<const T> row, workspace& ws, const row_request& rq,
                                     std::span<const std::int32_t> tokens, std::span<float> out) const {
    std::fill(out.begin(), out.end(), -std::numeric_limits<float>::infinity());
    distribution d;
    const status st = with_processed(row, ws, rq, [&](row_state& s) {
      const bool greedy = s.greedy();
      d = materialize(s);
      if (d.status() != status::ok) return;
      const std::span<const std::int32_t> ids = d.ids();
      if (greedy) {
        for (std::size_t i = 0; i < tokens.size(); ++i)
          if (tokens[i] == ids[0]) out[i] = 0.0f;
        return;
      }
      const float m = s.max_logit();
      const float inv = s.inv_temperature();
      const double log_z =
          std::log(detail::to_double(detail::exp_sum(s.logits(), s.size(), m, inv, nullptr)));
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        std::size_t j = ids.size();
        if (d.sorted()) {
          j = static_cast<std::size_t>(std::find(ids.begin(), ids.end(), tokens[i]) - ids.begin());
        } else {  // ascending ids
          const auto it = std::lower_bound(ids.begin(), ids.end(), tokens[i]);
          if (it != ids.end() && *it == tokens[i]) j = static_cast<std::size_t>(it - ids.begin());
        }
        if (j < ids.size() && d.probs()[j] > 0.0f)
          out[i] = static_cast<float>(static_cast<double>(detail::scaled(s.logits()[j], m, inv)) - log_z);
      }
    });
    return st == status::ok ? d : distribution(nullptr, nullptr, 0, false, st);
  }

  // The row state a draw starts from: the processors, then the stages (or mirostat's temperature and
  // cut), no draw; f(row_state&) reads it. Returns the status sample() gives a row it cannot start
  // (f is then not called), else ok.
  template <logit_type T, class F>
  status with_processed(std::span<const T> row, workspace& ws, const row_request& rq, F&& f) const {
    if (row.empty()) return status::empty_row;
    if (!procs_.fits(row.size(), rq)) return status::invalid_input;
    if (params_.mirostat != 0 && rq.mirostat_mu == nullptr) return status::invalid_input;
    with_row(row, ws, rq, [&](auto x) {
      row_state s(x, ws);
      const draw_key key = key_of(rq, params_.seed);
      if (params_.mirostat != 0) {
        temperature_stage{{}, params_.temperature}.apply(s);
        if (params_.mirostat == 1) mirostat_v1(rq).truncate(s);
        if (params_.mirostat == 2) mirostat_v2(rq).truncate(s);
      } else {
        std::visit([&](const auto& c) { c.apply(s, key); }, chain_);
      }
      f(s);
    });
    return status::ok;
  }

  // The logprobs of a drawn row in processed mode: r.token's rank in the distribution the draw used
  // (s, after the draw), and its top-n. sample() ends with it; so does the sharded sampler.
  static void processed_logprobs(row_state& s, row_result& r, workspace& ws, std::span<token_logprob> top) {
    if (s.greedy()) {
      r.rank = 1;
      if (!top.empty()) {
        top[0] = {r.token, 0.0f};
        r.top_count = 1;
      }
      return;
    }
    const float m = s.max_logit();
    const float inv = s.inv_temperature();
    // The chosen token's own logit, found among the candidates.
    float xt = m;
    if (s.dense()) {
      xt = s.value(static_cast<std::size_t>(r.token));
    } else {
      for (std::size_t i = 0; i < s.size(); ++i)
        if (s.id(i) == r.token) {
          xt = s.value(i);
          break;
        }
    }
    r.rank = static_cast<std::int32_t>(
        s.visit([&](const auto* x) { return detail::count_greater(x, s.size(), xt); }) + 1);
    if (top.empty()) return;
    const double log_z = std::log(s.draw_sum());  // the draw's normalizer, not a second exp pass
    const std::size_t k = std::min(top.size(), s.size());
    std::uint64_t* keys = ws.keys.ensure(detail::select_capacity(k));
    const std::size_t c =
        s.visit([&](const auto* x) { return detail::select_top_k(x, s.ids_or_null(), s.size(), k, keys); });
    // The draw's own formula (row_state::draw), so the chosen token's entry equals r.logprob.
    for (std::size_t i = 0; i < c; ++i)
      top[i] = {detail::key_id(keys[i]),
                static_cast<float>(static_cast<double>(detail::scaled(detail::key_value(keys[i]), m, inv)) -
                                   log_z)};
    r.top_count = static_cast<std::uint32_t>(c);
  }

 private:
  // Calls f with the row the stages read: the processors' float row when any processor acts on this
  // request, else the caller's row as it is (any dtype, no copy).
  template <logit_type T, class F>
  decltype(auto) with_row(std::span<const T> row, workspace& ws, const row_request& rq, F&& f) const {
    if (procs_.active(rq)) return f(std::span<const float>(procs_.apply(row, ws, rq), row.size()));
    return f(row);
  }

  template <class C, logit_type U, logit_type T>
  row_result run(const C& c, std::span<const U> x, std::span<const T> raw, workspace& ws,
                 const row_request& rq, std::span<token_logprob> top) const {
    row_state s(x, ws);
    const sample_result d = c.finish(s, key_of(rq, params_.seed));
    row_result r{d.token, d.logprob, 0, 0, d.status};
    if (d.status != status::ok || params_.logprobs < 0) return r;
    const std::size_t n = std::min(top_n(), top.size());
    if (params_.logprobs_mode == logprob_mode::raw) {
      raw_logprobs(raw, r, ws, top.first(n));
    } else {
      processed_logprobs(s, r, ws, top.first(n));
    }
    return r;
  }

  // The token's place in log_softmax(raw), and the raw top-n: log_softmax's own rules and bits
  // (ops/normalizer.hpp). Three passes: the top-n selection (or a max), the normalizer, the rank.
  template <logit_type T>
  static void raw_logprobs(std::span<const T> raw, row_result& r, workspace& ws,
                           std::span<token_logprob> top) {
    const T* x = raw.data();
    const std::size_t v = raw.size();
    detail::raw_normalizer norm;
    if (top.empty()) {
      norm = detail::normalizer_for(x, v, detail::max_value(x, v));
    } else {
      std::uint64_t* keys = ws.keys.ensure(detail::select_capacity(top.size()));
      r.top_count =
          static_cast<std::uint32_t>(detail::top_raw_logprobs(x, v, top.size(), keys, top.data(), &norm));
    }
    const float xt = to_float(x[r.token]);
    r.logprob = norm(xt);
    r.rank = static_cast<std::int32_t>(detail::count_greater(x, v, xt) + 1);
  }

  mirostat_v1_stage mirostat_v1(const row_request& rq) const noexcept {
    return {{}, params_.mirostat_tau, params_.mirostat_eta, mirostat_v1_tokens, rq.mirostat_mu};
  }
  mirostat_v2_stage mirostat_v2(const row_request& rq) const noexcept {
    return {{}, params_.mirostat_tau, params_.mirostat_eta, rq.mirostat_mu};
  }

  template <engine_order O, std::size_t... I>
  static detail::engine_chain<O> build_chain(const sampling_params& p, std::index_sequence<I...>) {
    constexpr const detail::engine_order_info& e = detail::order_info(O);
    return detail::engine_chain<O>(detail::stage_at<e.slots[I]>::make(p, e)..., categorical_stage{});
  }
  template <engine_order O>
  static detail::engine_chain<O> build_chain(const sampling_params& p) {
    return build_chain<O>(p, std::make_index_sequence<detail::order_info(O).size>{});
  }

  static any_chain make_chain(const sampling_params& p, engine_order order) {
    validate(p, order);
    switch (order) {
      case engine_order::vllm:
        return build_chain<engine_order::vllm>(p);
      case engine_order::hf:
        return build_chain<engine_order::hf>(p);
      case engine_order::llama_cpp:
        return build_chain<engine_order::llama_cpp>(p);
      case engine_order::nucleus:
        break;
    }
    return build_chain<engine_order::nucleus>(p);
  }

  sampling_params params_;
  engine_order order_;
  any_chain chain_;
  detail::processors procs_;
};

namespace presets {

// Each engine's stage order and boundary rules (docs/semantics.md has the table).
inline sampler nucleus(const sampling_params& p) {
  return sampler(p, engine_order::nucleus);
}
inline sampler vllm(const sampling_params& p) {
  return sampler(p, engine_order::vllm);
}
inline sampler hf(const sampling_params& p) {
  return sampler(p, engine_order::hf);
}
inline sampler llama_cpp(const sampling_params& p) {
  return sampler(p, engine_order::llama_cpp);
}

}  // namespace presets
}  // namespace nucleus
