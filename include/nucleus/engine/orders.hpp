// Each engine's stage order, written once as data: the sampler's chains (engine/sampler.hpp), the
// chain-to-sampler mapping (sharded/chain.hpp) and the knob table (engine/knobs.hpp) derive from it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "nucleus/engine/params.hpp"
#include "nucleus/stages/top_k.hpp"

namespace nucleus {

// vLLM samples greedily below this temperature (vllm/v1/sample/sampler.py, _SAMPLING_EPS).
inline constexpr float vllm_greedy_below = 1e-5f;

namespace detail {

// A place in an engine's chain; each slot holds one stage type (engine/sampler.hpp, stage_at).
enum class slot : std::uint8_t { none, temp, dyn, sigma, top_k, typical, top_p, min_p, eps, eta, xtc };

inline constexpr std::size_t max_slots = 9;

struct engine_order_info {
  engine_order order;
  const char* name;                   // as the server's nucleus.preset and Python's order= spell it
  const char* engine;                 // whose order it is, for error text
  std::array<slot, max_slots> slots;  // the stages in order; slot::none pads the end
  std::size_t size;                   // slots used
  ties top_k_ties;                    // top-k's tie rule
  bool top_k_min_keep;                // min_keep raises top-k's k (HF's min_tokens_to_keep)
  float greedy_below;                 // a temperature below this samples greedily (0: only T = 0)
};

inline constexpr engine_order_info engine_orders[] = {
    {engine_order::nucleus,
     "nucleus",
     "nucleus",
     {slot::dyn, slot::sigma, slot::top_k, slot::typical, slot::top_p, slot::min_p, slot::eps, slot::eta,
      slot::xtc},
     9,
     ties::exact,
     true,
     0.0f},
    {engine_order::vllm,
     "vllm",
     "vLLM",
     {slot::temp, slot::min_p, slot::top_k, slot::top_p},
     4,
     ties::keep,
     false,
     vllm_greedy_below},
    {engine_order::hf,
     "hf",
     "Hugging Face",
     {slot::temp, slot::top_k, slot::top_p, slot::min_p, slot::typical, slot::eps, slot::eta},
     7,
     ties::keep,
     true,
     0.0f},
    {engine_order::llama_cpp,
     "llama_cpp",
     "llama.cpp",
     {slot::sigma, slot::top_k, slot::typical, slot::top_p, slot::min_p, slot::xtc, slot::dyn},
     7,
     ties::exact,
     false,
     0.0f},
};

constexpr const engine_order_info& order_info(engine_order o) {
  for (const engine_order_info& e : engine_orders)
    if (e.order == o) return e;
  return engine_orders[0];
}

// Whether an engine's order has a slot (temperature counts as present where dynamic temperature is).
constexpr bool has_slot(engine_order o, slot s) {
  const engine_order_info& e = order_info(o);
  for (std::size_t i = 0; i < e.size; ++i)
    if (e.slots[i] == s || (s == slot::temp && e.slots[i] == slot::dyn)) return true;
  return false;
}

// The temperature the chain uses: 0 (greedy) below the engine's threshold.
constexpr float chain_temperature(engine_order o, float t) {
  return t < order_info(o).greedy_below ? 0.0f : t;
}

}  // namespace detail
}  // namespace nucleus
