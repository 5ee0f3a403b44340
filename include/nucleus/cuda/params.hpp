// make_row_params: a request's knobs compiled, on the host, into the row_params the GPU sampler reads
// (nucleus/cuda/sampler.cuh). The engine order comes from the one order table (engine/orders.hpp)
// and the knobs from the knob table (engine/knobs.hpp): a knob the GPU does not implement yet is
// refused by name rather than ignored. Plain C++: no CUDA needed to build the parameters.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

#include "nucleus/cuda/row_params.hpp"
#include "nucleus/engine/knobs.hpp"
#include "nucleus/engine/orders.hpp"
#include "nucleus/engine/params.hpp"

namespace nucleus::cuda {

// The knobs the GPU sampler implements; any other that is on is refused.
inline constexpr std::string_view gpu_knobs[] = {"temperature", "top_k", "top_p", "min_p", "min_keep"};

inline bool gpu_supports(const knob& k) {
  for (std::string_view name : gpu_knobs)
    if (name == k.name) return true;
  return false;
}

// Throws std::invalid_argument: for a bad field (as nucleus::sampler does), for a knob the GPU
// sampler lacks, and for logprobs other than -1 (the draw's own logprob is always written).
inline row_params make_row_params(const sampling_params& p, engine_order order) {
  validate(p, order);
  for (const knob& k : knobs)
    if (k.on && k.on(p) && !gpu_supports(k))
      throw std::invalid_argument(std::string("nucleus::cuda: ") + k.name + " is not implemented on the GPU");
  if (p.logprobs != -1)
    throw std::invalid_argument("nucleus::cuda: logprobs must be -1 (the draw's own logprob is written)");

  const nucleus::detail::engine_order_info& e = nucleus::detail::order_info(order);
  row_params r;
  int n = 0;
  for (std::size_t i = 0; i < e.size; ++i) {
    switch (e.slots[i]) {
      case nucleus::detail::slot::temp:
      case nucleus::detail::slot::dyn:  // dynamic temperature with range 0 (refused above otherwise)
        r.stages[n++] = gpu_stage::temperature;
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
      default:
        break;  // a stage whose knobs are all off (checked above)
    }
  }
  // As the sampler's temperature stage (engine/sampler.hpp, stage_at; stages/temperature.hpp): 1/T
  // times the row's 1, greedy at T = 0 or when 1/T overflows.
  const float t = nucleus::detail::chain_temperature(order, p.temperature);
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
  return r;
}

}  // namespace nucleus::cuda
