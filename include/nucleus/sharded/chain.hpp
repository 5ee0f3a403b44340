// Sharding a compile-time chain: the engine sampler that gives the chain's results bit for bit, so
// that shard_sampler, split_sampler and nucleus::mpi can run it on a split row. A chain maps when
// its stages sit in one engine's order (docs/semantics.md, the presets' table), each at most once;
// otherwise this throws std::invalid_argument at construction, naming the stage.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "nucleus/engine/sampler.hpp"
#include "nucleus/stages/argmax.hpp"

namespace nucleus {

namespace detail {

// One active stage of a chain: its slot (temperature may take either temperature slot) and how it
// sets the sampling_params. Inactive stages (a knob at its "off" value) return nothing.
struct chain_step {
  slot where = slot::none;
  bool either_temperature = false;  // a plain temperature: the temp slot or a dyn slot with range 0
  ties tie_rule = ties::exact;
  std::size_t min_keep = 1;
  const char* name = "";
  void (*set)(sampling_params&, const void*) = nullptr;
  const void* stage = nullptr;
};

template <class S>
std::optional<chain_step> step_of(const S& st) {
  auto make = [&](slot w, const char* name, void (*set)(sampling_params&, const void*)) {
    chain_step c{w, false, ties::exact, 1, name, set, &st};
    if constexpr (requires { st.min_keep; }) c.min_keep = st.min_keep;
    return std::optional<chain_step>(c);
  };
  if constexpr (std::is_same_v<S, temperature_stage>) {
    if (st.temperature == 1.0f) return std::nullopt;  // 1/T = 1: nothing to scale
    auto c = make(slot::temp, "temperature", [](sampling_params& p, const void* s) {
      p.temperature = static_cast<const temperature_stage*>(s)->temperature;
    });
    c->either_temperature = true;
    return c;
  } else if constexpr (std::is_same_v<S, dynamic_temperature_stage>) {
    if (st.range <= 0.0f && st.temperature == 1.0f) return std::nullopt;
    auto c = make(slot::dyn, "dynamic_temperature", [](sampling_params& p, const void* s) {
      const auto* d = static_cast<const dynamic_temperature_stage*>(s);
      p.temperature = d->temperature;
      p.dynatemp_range = d->range;
      p.dynatemp_exponent = d->exponent;
    });
    c->either_temperature = st.range <= 0.0f;
    return c;
  } else if constexpr (std::is_same_v<S, top_k_stage>) {
    if (st.top_k <= 0) return std::nullopt;
    auto c = make(slot::top_k, "top_k", [](sampling_params& p, const void* s) {
      p.top_k = static_cast<const top_k_stage*>(s)->top_k;
    });
    c->tie_rule = st.tie_rule;
    return c;
  } else if constexpr (std::is_same_v<S, top_p_stage>) {
    if (st.top_p >= 1.0f) return std::nullopt;
    return make(slot::top_p, "top_p", [](sampling_params& p, const void* s) {
      p.top_p = static_cast<const top_p_stage*>(s)->top_p;
    });
  } else if constexpr (std::is_same_v<S, min_p_stage>) {
    if (st.min_p <= 0.0f) return std::nullopt;
    return make(slot::min_p, "min_p", [](sampling_params& p, const void* s) {
      p.min_p = static_cast<const min_p_stage*>(s)->min_p;
    });
  } else if constexpr (std::is_same_v<S, typical_stage>) {
    if (st.typical_p >= 1.0f) return std::nullopt;
    return make(slot::typical, "typical", [](sampling_params& p, const void* s) {
      p.typical_p = static_cast<const typical_stage*>(s)->typical_p;
    });
  } else if constexpr (std::is_same_v<S, top_n_sigma_stage>) {
    if (st.n_sigma <= 0.0f) return std::nullopt;
    return make(slot::sigma, "top_n_sigma", [](sampling_params& p, const void* s) {
      p.top_n_sigma = static_cast<const top_n_sigma_stage*>(s)->n_sigma;
    });
  } else if constexpr (std::is_same_v<S, epsilon_cutoff_stage>) {
    if (st.epsilon <= 0.0f) return std::nullopt;
    return make(slot::eps, "epsilon_cutoff", [](sampling_params& p, const void* s) {
      p.epsilon_cutoff = static_cast<const epsilon_cutoff_stage*>(s)->epsilon;
    });
  } else if constexpr (std::is_same_v<S, eta_cutoff_stage>) {
    if (st.eta <= 0.0f) return std::nullopt;
    return make(slot::eta, "eta_cutoff", [](sampling_params& p, const void* s) {
      p.eta_cutoff = static_cast<const eta_cutoff_stage*>(s)->eta;
    });
  } else if constexpr (std::is_same_v<S, xtc_stage>) {
    if (st.probability <= 0.0f || st.threshold > 0.5f) return std::nullopt;
    return make(slot::xtc, "xtc", [](sampling_params& p, const void* s) {
      const auto* x = static_cast<const xtc_stage*>(s);
      p.xtc_probability = x->probability;
      p.xtc_threshold = x->threshold;
    });
  } else {
    throw std::invalid_argument(
        "nucleus::sampler_for: the chain holds a stage no engine order has (only the library's own "
        "truncation and temperature stages map to a sampler)");
  }
}

// Tries one engine's order: every active step in a later slot than the one before it.
inline std::optional<sampling_params> fit(const engine_order_info& po, std::span<const chain_step> steps,
                                          sampling_params p) {
  std::size_t at = 0;
  for (const chain_step& c : steps) {
    bool placed = false;
    for (; at < po.size && !placed; ++at) {
      const slot s = po.slots[at];
      placed = s == c.where || (c.either_temperature && (s == slot::temp || s == slot::dyn));
    }
    if (!placed) return std::nullopt;
    if (c.where == slot::top_k && c.tie_rule != po.top_k_ties) return std::nullopt;
    c.set(p, c.stage);
  }
  // vLLM's preset samples greedily below vllm_greedy_below, where a chain would not.
  if (p.temperature > 0.0f && p.temperature < po.greedy_below) return std::nullopt;
  return p;
}

}  // namespace detail

// The sampler whose sample() equals this chain's draw, bit for bit: chain(row, ws, draw_key{seed,
// position, stream}) gives sampler_for(chain, seed).sample(row, ws, {.position = position, .stream =
// stream}) — token, logprob and status. Stages at their "off" values are left out; the rest must sit
// in one engine's order (nucleus, hf, llama_cpp, vllm), each stage at most once, with min_keep 1 and
// top-k's tie rule that order's. Anything else throws std::invalid_argument naming what does not fit.
template <class... S>
sampler sampler_for(const chain<S...>& c, std::uint64_t seed) {
  static_assert(chain<S...>::terminal,
                "nucleus::sampler_for: the chain must end in categorical() or argmax()");
  using last = std::tuple_element_t<sizeof...(S) - 1, std::tuple<S...>>;
  static_assert(std::is_same_v<last, categorical_stage> || std::is_same_v<last, argmax_stage>,
                "nucleus::sampler_for: the chain must end in categorical() or argmax() (mirostat's mu is "
                "request state: build a sampler with sampling_params::mirostat)");
  std::array<detail::chain_step, sizeof...(S)> buf{};
  std::size_t n = 0;
  bool greedy = std::is_same_v<last, argmax_stage>;
  bool xtc = false;
  std::apply(
      [&](const auto&... st) {
        (
            [&](const auto& one) {
              using T = std::remove_cvref_t<decltype(one)>;
              if constexpr (!stage_traits<T>::terminal) {
                if constexpr (std::is_same_v<T, temperature_stage>) {
                  if (one.temperature == 0.0f ||
                      !(1.0f / one.temperature <= std::numeric_limits<float>::max()))
                    greedy = true;
                }
                if (auto step = detail::step_of(one)) {
                  if (step->min_keep != 1)
                    throw std::invalid_argument(
                        std::string("nucleus::sampler_for: ") + step->name +
                        " has min_keep != 1 (a sampler has one min_keep for all stages)");
                  xtc = xtc || step->where == detail::slot::xtc;
                  buf[n++] = *step;
                }
              }
            }(st),
            ...);
      },
      c.stages());
  sampling_params base;
  base.seed = seed;
  // Greedy at any point gives the row's argmax (every cut keeps the rank-first token), unless xtc,
  // which removes the top tokens, ran before it: then the order must place it.
  if (greedy && !xtc) {
    base.temperature = 0.0f;
    return sampler(base, engine_order::nucleus);
  }
  if (std::is_same_v<last, argmax_stage>)
    throw std::invalid_argument("nucleus::sampler_for: argmax() after xtc() maps to no engine order");
  const std::span<const detail::chain_step> steps(buf.data(), n);
  // Tried in this order: a chain that fits several maps to the first.
  for (engine_order o :
       {engine_order::nucleus, engine_order::hf, engine_order::llama_cpp, engine_order::vllm})
    if (auto p = detail::fit(detail::order_info(o), steps, base)) return sampler(*p, o);
  std::string names;
  for (const auto& s : steps) names += std::string(names.empty() ? "" : ", ") + s.name;
  throw std::invalid_argument("nucleus::sampler_for: the stages (" + names +
                              ") are in no engine's order (nucleus, hf, llama_cpp, vllm), or one repeats, or "
                              "top_k's tie rule is not that order's");
}

// A single terminal stage (categorical(), argmax()) is a chain of one.
template <class S>
requires(std::derived_from<S, stage_base> && !detail::is_chain<S>::value) sampler
    sampler_for(const S& s, std::uint64_t seed) {
  return sampler_for(chain<S>(s), seed);
}

}  // namespace nucleus
