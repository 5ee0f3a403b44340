// make_row_params: a request's knobs compiled, on the host, into the row_params the GPU sampler reads
// (nucleus/cuda/sampler.cuh). The engine order comes from the one order table (engine/orders.hpp)
// and the knobs from the knob table (engine/knobs.hpp): a knob the GPU does not implement yet is
// refused by name rather than ignored. Plain C++: no CUDA needed to build the parameters.
//
// The request's id lists go into a list arena of 32-bit words that the caller uploads once per
// batch (batch_view::lists); row_params holds their offsets, so a captured graph reads new lists
// from the same device buffer.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "nucleus/cuda/row_params.hpp"
#include "nucleus/engine/knobs.hpp"
#include "nucleus/engine/orders.hpp"
#include "nucleus/engine/params.hpp"

namespace nucleus::cuda {

// The knobs the GPU sampler implements; any other that is on is refused.
inline constexpr std::string_view gpu_knobs[] = {"temperature",
                                                 "top_k",
                                                 "top_p",
                                                 "min_p",
                                                 "min_keep",
                                                 "top_n_sigma",
                                                 "epsilon_cutoff",
                                                 "eta_cutoff",
                                                 "xtc_probability",
                                                 "xtc_threshold",
                                                 "typical_p",
                                                 "mirostat",
                                                 "mirostat_tau",
                                                 "mirostat_eta",
                                                 "dynatemp_range",
                                                 "dynatemp_exponent",
                                                 "repetition_penalty",
                                                 "presence_penalty",
                                                 "frequency_penalty",
                                                 "penalty_last_n",
                                                 "logit_bias",
                                                 "allowed_token_ids",
                                                 "banned_token_ids",
                                                 "min_tokens",
                                                 "eos_token_ids"};

inline bool gpu_supports(const knob& k) {
  for (std::string_view name : gpu_knobs)
    if (name == k.name) return true;
  return false;
}

namespace detail {
inline list_ref append_ids(std::vector<std::uint32_t>& lists, const std::vector<std::int32_t>& ids,
                           std::int32_t& max_id) {
  const list_ref r{static_cast<std::uint32_t>(lists.size()), static_cast<std::uint32_t>(ids.size())};
  for (std::int32_t t : ids) {
    lists.push_back(static_cast<std::uint32_t>(t));
    max_id = std::max(max_id, t);
  }
  return r;
}
}  // namespace detail

// Throws std::invalid_argument: for a bad field (as nucleus::sampler does) and for a knob the GPU
// sampler lacks. Appends the request's id lists to `lists` (the batch's arena).
inline row_params make_row_params(const sampling_params& p, engine_order order,
                                  std::vector<std::uint32_t>& lists) {
  validate(p, order);
  for (const knob& k : knobs)
    if (k.on && k.on(p) && !gpu_supports(k))
      throw std::invalid_argument(std::string("nucleus::cuda: ") + k.name + " is not implemented on the GPU");

  const nucleus::detail::engine_order_info& e = nucleus::detail::order_info(order);
  row_params r;
  int n = 0;
  for (std::size_t i = 0; i < e.size; ++i) {
    switch (e.slots[i]) {
      case nucleus::detail::slot::temp:
        r.stages[n++] = gpu_stage::temperature;
        break;
      case nucleus::detail::slot::dyn:  // with range <= 0 a plain temperature
        r.stages[n++] = p.dynatemp_range > 0.0f ? gpu_stage::dynamic_temperature : gpu_stage::temperature;
        break;
      case nucleus::detail::slot::sigma:
        r.stages[n++] = gpu_stage::top_n_sigma;
        break;
      case nucleus::detail::slot::eps:
        r.stages[n++] = gpu_stage::epsilon_cutoff;
        break;
      case nucleus::detail::slot::eta:
        r.stages[n++] = gpu_stage::eta_cutoff;
        break;
      case nucleus::detail::slot::xtc:
        r.stages[n++] = gpu_stage::xtc;
        break;
      case nucleus::detail::slot::top_k:
        r.stages[n++] = gpu_stage::top_k;
        break;
      case nucleus::detail::slot::top_p:
        r.stages[n++] = gpu_stage::top_p;
        break;
      case nucleus::detail::slot::min_p:
        r.stages[n++] = gpu_stage::min_p;
        break;
      case nucleus::detail::slot::typical:
        r.stages[n++] = gpu_stage::typical;
        break;
      default:
        break;  // a stage whose knobs are all off (checked above)
    }
  }
  // mirostat replaces the order's stages (engine/sampler.hpp, sample): the temperature as given (no
  // engine threshold), then its cut and draw.
  if (p.mirostat != 0) {
    for (gpu_stage& s : r.stages) s = gpu_stage::none;
    r.stages[0] = gpu_stage::temperature;
  }
  // As the sampler's temperature stage (engine/sampler.hpp, stage_at; stages/temperature.hpp): 1/T
  // times the row's 1, greedy at T = 0 or when 1/T overflows.
  const float t = p.mirostat != 0 ? p.temperature : nucleus::detail::chain_temperature(order, p.temperature);
  r.greedy = t == 0.0f ? 1 : 0;
  if (t != 0.0f) {
    r.inv_temperature = 1.0f / t;
    if (!(r.inv_temperature <= std::numeric_limits<float>::max())) r.greedy = 1;
  }
  r.top_k = e.top_k_min_keep && p.top_k > 0 ? std::max(p.top_k, p.min_keep) : p.top_k;
  r.keep_ties = e.top_k_ties == ties::keep ? 1 : 0;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.log_min_p = p.min_p > 0.0f ? std::log(p.min_p) : 0.0f;
  r.min_keep = static_cast<std::uint32_t>(p.min_keep);
  r.temperature = t;
  r.dynatemp_range = p.dynatemp_range;
  r.dynatemp_exponent = p.dynatemp_exponent;
  r.top_n_sigma = p.top_n_sigma;
  r.epsilon_cutoff = p.epsilon_cutoff;
  r.eta_cutoff = p.eta_cutoff;
  r.xtc_probability = p.xtc_probability;
  r.xtc_threshold = p.xtc_threshold;
  r.typical_p = p.typical_p;
  r.mirostat = static_cast<std::uint8_t>(p.mirostat);
  r.mirostat_tau = p.mirostat_tau;
  r.mirostat_eta = p.mirostat_eta;
  r.logprobs = static_cast<std::int8_t>(p.logprobs);
  r.raw_logprobs = p.logprobs_mode == logprob_mode::raw ? 1 : 0;

  // The processors (engine/processors.hpp). EOS ids count only while min_tokens bans them.
  r.allowed = detail::append_ids(lists, p.allowed_token_ids, r.max_id);
  r.banned = detail::append_ids(lists, p.banned_token_ids, r.max_id);
  if (p.min_tokens > 0) r.eos = detail::append_ids(lists, p.eos_token_ids, r.max_id);
  r.min_tokens = static_cast<std::uint32_t>(p.min_tokens);
  // The bias pairs, stably sorted by id: one thread applies each id's run in request order (the
  // clamped sums do not commute), and different ids go in parallel.
  std::vector<token_bias> bias = p.logit_bias;
  std::stable_sort(bias.begin(), bias.end(),
                   [](const token_bias& a, const token_bias& b) { return a.token < b.token; });
  r.bias = {static_cast<std::uint32_t>(lists.size()), static_cast<std::uint32_t>(bias.size())};
  for (const token_bias& b : bias) {
    lists.push_back(static_cast<std::uint32_t>(b.token));
    lists.push_back(std::bit_cast<std::uint32_t>(b.bias));
    r.max_id = std::max(r.max_id, b.token);
  }
  r.repetition = p.repetition_penalty;
  r.presence = p.presence_penalty;
  r.frequency = p.frequency_penalty;
  r.windowed = order == engine_order::llama_cpp ? 1 : 0;
  r.last_n = r.windowed ? p.penalty_last_n : -1;
  r.lists = r.allowed.size || r.banned.size || r.eos.size || r.bias.size || r.repetition != 1.0f ||
                    r.presence != 0.0f || r.frequency != 0.0f
                ? 1
                : 0;
  return r;
}

// For a request without id lists (throws if it has one: those need the batch's arena).
inline row_params make_row_params(const sampling_params& p, engine_order order) {
  std::vector<std::uint32_t> lists;
  row_params r = make_row_params(p, order, lists);
  if (!lists.empty())
    throw std::invalid_argument("nucleus::cuda: a request with token id lists needs the list arena");
  return r;
}

}  // namespace nucleus::cuda
