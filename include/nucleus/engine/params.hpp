// What rides in a request: the sampling knobs, validated once when a sampler is built from them.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace nucleus {

// Which distribution a row's logprob, rank and top-n list describe (docs/semantics.md).
enum class logprob_mode : std::uint8_t {
  raw,        // log_softmax of the row as given (T = 1, before any processor): vLLM's default
  processed,  // the distribution the draw used: after processors, temperature and truncation
};

// Whose stage order and boundary rules a sampler follows.
enum class engine_order : std::uint8_t { nucleus, vllm, hf, llama_cpp };

struct token_bias {
  std::int32_t token = 0;
  float bias = 0.0f;
};

inline constexpr int max_logprobs = 64;

struct sampling_params {
  float temperature = 1.0f;  // >= 0, finite; 0 is greedy
  int top_k = 0;             // <= 0 disables
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]

  float repetition_penalty = 1.0f;  // > 0, finite; 1 disables
  float presence_penalty = 0.0f;    // finite
  float frequency_penalty = 0.0f;   // finite
  int penalty_last_n = 64;          // llama_cpp order only: 0 none, -1 all, else the last n tokens

  std::vector<token_bias> logit_bias{};           // finite biases, ids >= 0
  std::vector<std::int32_t> allowed_token_ids{};  // empty: every token allowed
  std::vector<std::int32_t> banned_token_ids{};
  int min_tokens = 0;  // >= 0; EOS ids banned until this many were generated
  std::vector<std::int32_t> eos_token_ids{};

  std::uint64_t seed = 0;
  // As vLLM: -1 none (row_result.logprob is then the draw's own, in the processed distribution, and
  // rank is 0: no extra pass); 0 the chosen token's logprob and rank in logprobs_mode; n > 0 also the
  // n most likely alternatives. At most max_logprobs.
  int logprobs = -1;
  logprob_mode logprobs_mode = logprob_mode::raw;
};

namespace detail {

[[noreturn]] inline void bad_param(const char* field, const std::string& what) {
  throw std::invalid_argument(std::string("nucleus::sampling_params.") + field + ": " + what);
}

inline void check_ids(const char* field, const std::vector<std::int32_t>& ids) {
  for (std::int32_t t : ids)
    if (t < 0) bad_param(field, "token id " + std::to_string(t) + " is negative");
}

}  // namespace detail

// Throws std::invalid_argument naming the first bad field. Ids are checked against the vocabulary
// when a row is sampled (status::invalid_input), since a sampler does not know V.
inline void validate(const sampling_params& p, engine_order order) {
  using detail::bad_param;
  if (!(p.temperature >= 0.0f) || std::isinf(p.temperature))
    bad_param("temperature", "must be finite and >= 0 (0 means greedy)");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) bad_param("top_p", "must be in (0, 1]");
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) bad_param("min_p", "must be in [0, 1]");
  if (!(p.repetition_penalty > 0.0f) || std::isinf(p.repetition_penalty))
    bad_param("repetition_penalty", "must be finite and > 0 (1 disables)");
  if (!std::isfinite(p.presence_penalty)) bad_param("presence_penalty", "must be finite");
  if (!std::isfinite(p.frequency_penalty)) bad_param("frequency_penalty", "must be finite");
  if (order == engine_order::hf && (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f))
    bad_param(p.presence_penalty != 0.0f ? "presence_penalty" : "frequency_penalty",
              "the hf order has no presence or frequency penalty (Hugging Face has none)");
  if (p.penalty_last_n < -1) bad_param("penalty_last_n", "must be -1 (all), 0 (none) or a count");
  for (const token_bias& b : p.logit_bias) {
    if (b.token < 0) bad_param("logit_bias", "token id " + std::to_string(b.token) + " is negative");
    if (!std::isfinite(b.bias)) bad_param("logit_bias", "bias must be finite");
  }
  detail::check_ids("allowed_token_ids", p.allowed_token_ids);
  detail::check_ids("banned_token_ids", p.banned_token_ids);
  detail::check_ids("eos_token_ids", p.eos_token_ids);
  if (p.min_tokens < 0) bad_param("min_tokens", "must be >= 0");
  if (p.logprobs < -1 || p.logprobs > max_logprobs)
    bad_param("logprobs", "must be -1 (none) or in [0, " + std::to_string(max_logprobs) + "]");
}

}  // namespace nucleus
