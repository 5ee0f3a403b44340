// What rides in a request: the sampling knobs, validated once when a sampler is built from them
// (engine/knobs.hpp describes each field: its range, its engines, its name in a request).
#pragma once

#include <cstdint>
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

  // More truncation, named and defaulted as llama.cpp's server and Hugging Face name them; each
  // default is "off". Presets whose engine lacks a stage reject its field (docs/semantics.md).
  float typical_p = 1.0f;          // (0, 1]; 1 disables
  float top_n_sigma = -1.0f;       // finite; <= 0 disables
  float xtc_probability = 0.0f;    // [0, 1]; 0 disables
  float xtc_threshold = 0.1f;      // [0, 1]; > 0.5 disables
  float epsilon_cutoff = 0.0f;     // [0, 1); 0 disables
  float eta_cutoff = 0.0f;         // [0, 1); 0 disables
  float dynatemp_range = 0.0f;     // finite; <= 0 disables (temperature then applies as is)
  float dynatemp_exponent = 1.0f;  // finite, >= 0
  int mirostat = 0;                // 0 off, 1 mirostat, 2 mirostat 2.0 (replaces the truncation stages)
  float mirostat_tau = 5.0f;       // finite, >= 0
  float mirostat_eta = 0.1f;       // finite, >= 0

  // The truncation stages' floor (llama.cpp's min_keep, HF's min_tokens_to_keep): each keeps at least
  // this many candidates, where its engine applies it (docs/semantics.md). >= 1; 1 is no floor
  // (llama.cpp's server sends 0 for that: here 0 is refused).
  int min_keep = 1;

  float repetition_penalty = 1.0f;  // > 0, finite; 1 disables
  float presence_penalty = 0.0f;    // finite
  float frequency_penalty = 0.0f;   // finite
  int penalty_last_n = 64;          // llama_cpp order only: 0 none, -1 all, else the last n tokens

  // DRY (llama.cpp): multiplier 0 disables. Breakers are token sequences, head first (a string
  // breaker must be tokenized by the caller, as llama.cpp does with its vocabulary).
  float dry_multiplier = 0.0f;  // finite, >= 0
  float dry_base = 1.75f;       // finite, >= 1
  int dry_allowed_length = 2;   // >= 0
  int dry_penalty_last_n = -1;  // -1 all of prompt + output, 0 disables, else the last n tokens
  std::vector<std::vector<std::int32_t>> dry_sequence_breakers{};
  int no_repeat_ngram_size = 0;  // >= 0; 0 disables (Hugging Face)

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

}  // namespace nucleus
