// One row's knobs as the GPU sampler reads them from device memory: plain data, written on the host
// by make_row_params (nucleus/cuda/params.hpp) from a sampling_params and an engine order, so every
// value the CPU derives with the host's libm (1/T, log(min_p)) carries the CPU's bits.
#pragma once

#include <cstdint>

namespace nucleus::cuda {

// The stages a GPU row runs, in its engine's order (engine/orders.hpp); none pads the end.
enum class gpu_stage : std::uint8_t { none, temperature, top_k, top_p, min_p };

inline constexpr int max_gpu_stages = 4;

struct row_params {
  gpu_stage stages[max_gpu_stages] = {};
  std::uint8_t greedy = 0;       // the temperature stage makes the row greedy (T = 0, T below the
                                 // engine's threshold, or a 1/T that overflows)
  std::uint8_t keep_ties = 0;    // top-k keeps every token tied with the k-th (vLLM, Hugging Face)
  float inv_temperature = 1.0f;  // 1/T, applied where the order has its temperature stage
  std::int32_t top_k = 0;        // <= 0 off; min_keep already folded in where the engine does that
  float top_p = 1.0f;            // >= 1 off
  float min_p = 0.0f;            // <= 0 off
  float log_min_p = 0.0f;        // std::log(min_p), taken on the host
  std::uint32_t min_keep = 1;    // the truncation stages' floor (1: none)
};

}  // namespace nucleus::cuda
