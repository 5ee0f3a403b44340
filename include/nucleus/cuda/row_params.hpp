// One row's knobs as the GPU sampler reads them from device memory: plain data, written on the host
// by make_row_params (nucleus/cuda/params.hpp) from a sampling_params and an engine order, so every
// value the CPU derives with the host's libm (1/T, log(min_p)) carries the CPU's bits. The request's
// id lists (logit bias, allowed, banned, EOS) live in the batch's list arena, which make_row_params
// fills and the caller uploads; the step's bitmask and token histories come as device pointers in a
// row_inputs.
#pragma once

#include <cstdint>

namespace nucleus::cuda {

// The stages a GPU row runs, in its engine's order (engine/orders.hpp); none pads the end.
enum class gpu_stage : std::uint8_t {
  none,
  temperature,
  dynamic_temperature,
  top_n_sigma,
  top_k,
  top_p,
  min_p,
  epsilon_cutoff,
  eta_cutoff,
  xtc,
  typical
};

inline constexpr int max_gpu_stages = 9;  // the longest order (engine/orders.hpp: max_slots)

// A run of 32-bit words in the batch's list arena (batch_view::lists).
struct list_ref {
  std::uint32_t at = 0;
  std::uint32_t size = 0;
};

struct row_params {
  gpu_stage stages[max_gpu_stages] = {};
  std::uint8_t greedy = 0;        // the temperature stage makes the row greedy (T = 0, T below the
                                  // engine's threshold, or a 1/T that overflows)
  std::uint8_t keep_ties = 0;     // top-k keeps every token tied with the k-th (vLLM, Hugging Face)
  std::int8_t logprobs = -1;      // sampling_params::logprobs: -1 none, else the top-n count (<= 64)
  std::uint8_t raw_logprobs = 1;  // logprobs_mode: 1 raw (log_softmax of the row as given), 0 processed
  float inv_temperature = 1.0f;   // 1/T, applied where the order has its temperature stage
  std::int32_t top_k = 0;         // <= 0 off; min_keep already folded in where the engine does that
  float top_p = 1.0f;             // >= 1 off
  float min_p = 0.0f;             // <= 0 off
  float log_min_p = 0.0f;         // std::log(min_p), taken on the host
  std::uint32_t min_keep = 1;     // the truncation stages' floor (1: none)
  float temperature = 1.0f;       // dynamic temperature's t (the engine's threshold applied)
  float dynatemp_range = 0.0f;    // > 0: dynamic temperature (its stage is otherwise temperature)
  float dynatemp_exponent = 1.0f;
  float top_n_sigma = 0.0f;      // <= 0 off
  float epsilon_cutoff = 0.0f;   // <= 0 off
  float eta_cutoff = 0.0f;       // <= 0 off
  float xtc_probability = 0.0f;  // <= 0 off
  float xtc_threshold = 0.1f;    // > 0.5 off
  float typical_p = 1.0f;        // >= 1 off (min_keep is its floor)
  std::uint8_t mirostat = 0;     // 1 or 2: replaces the stages with temperature, then mirostat's cut
                                 // and draw, which updates the row's mu (row_io::mirostat_mu); 0 off
  float mirostat_tau = 5.0f;
  float mirostat_eta = 0.1f;

  // The request processors (engine/processors.hpp), applied in its order to a float copy of the row.
  list_ref allowed;          // token ids; empty: every token allowed
  list_ref banned;           // token ids
  list_ref eos;              // token ids banned while the output is shorter than min_tokens
  list_ref bias;             // (id, float bits) pairs, stably sorted by id: each id's run in request order
  std::int32_t max_id = -1;  // the largest id of the lists: a row of V <= max_id is invalid_input
  std::uint32_t min_tokens = 0;
  float repetition = 1.0f;  // 1 off
  float presence = 0.0f;
  float frequency = 0.0f;
  std::int32_t last_n = -1;   // the penalties' window over prompt ++ output (llama.cpp's
                              // penalty_last_n, llama_cpp order only); -1: repetition reads the whole
                              // history and presence / frequency the output only
  std::uint8_t windowed = 0;  // the llama_cpp order: both penalties read the last_n window
  std::uint8_t lists = 0;     // any list or penalty is on (the row needs the processed copy)
};

// One row's per-step inputs, device pointers (any may be null with a size of 0).
struct row_inputs {
  const std::uint32_t* bitmask = nullptr;  // ceil(V / 32) words, bit i set = token i allowed
  const std::int32_t* prompt = nullptr;    // the prompt's tokens (repetition penalty)
  std::uint32_t prompt_size = 0;
  const std::int32_t* output = nullptr;  // the tokens generated so far
  std::uint32_t output_size = 0;
};

}  // namespace nucleus::cuda
