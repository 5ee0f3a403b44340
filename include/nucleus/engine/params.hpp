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

namespace detail {

[[noreturn]] inline void bad_param(const char* field, const std::string& what) {
  throw std::invalid_argument(std::string("nucleus::sampling_params.") + field + ": " + what);
}

inline void check_ids(const char* field, const std::vector<std::int32_t>& ids) {
  for (std::int32_t t : ids)
    if (t < 0) bad_param(field, "token id " + std::to_string(t) + " is negative");
}

}  // namespace detail

// A preset rejects the fields its engine has no stage for; mirostat replaces the truncation stages.
inline void check_order(const sampling_params& p, engine_order order) {
  using detail::bad_param;
  struct knob {
    const char* field;
    bool set;
    bool vllm, hf, llama_cpp;  // which engines have it
    bool truncates;            // replaced by mirostat
  };
  const knob knobs[] = {
      {"top_k", p.top_k > 0, true, true, true, true},
      {"top_p", p.top_p < 1.0f, true, true, true, true},
      {"min_p", p.min_p > 0.0f, true, true, true, true},
      {"typical_p", p.typical_p < 1.0f, false, true, true, true},
      {"top_n_sigma", p.top_n_sigma > 0.0f, false, false, true, true},
      {"xtc_probability", p.xtc_probability > 0.0f, false, false, true, true},
      {"epsilon_cutoff", p.epsilon_cutoff > 0.0f, false, true, false, true},
      {"eta_cutoff", p.eta_cutoff > 0.0f, false, true, false, true},
      {"min_keep", p.min_keep > 1, false, true, true, true},
      {"dynatemp_range", p.dynatemp_range > 0.0f, false, false, true, true},
      {"mirostat", p.mirostat != 0, false, false, true, false},
      {"presence_penalty", p.presence_penalty != 0.0f, true, false, true, false},
      {"frequency_penalty", p.frequency_penalty != 0.0f, true, false, true, false},
      {"dry_multiplier", p.dry_multiplier > 0.0f, false, false, true, false},
      {"no_repeat_ngram_size", p.no_repeat_ngram_size > 0, false, true, false, false},
  };
  for (const knob& k : knobs) {
    if (!k.set) continue;
    if (order == engine_order::vllm && !k.vllm)
      bad_param(k.field, "the vllm order has no such stage (vLLM has none)");
    if (order == engine_order::hf && !k.hf)
      bad_param(k.field, "the hf order has no such stage (Hugging Face has none)");
    if (order == engine_order::llama_cpp && !k.llama_cpp)
      bad_param(k.field, "the llama_cpp order has no such stage (llama.cpp has none)");
    if (p.mirostat != 0 && k.truncates)
      bad_param(k.field, "mirostat replaces the truncation stages: leave this field at its default");
  }
  // llama.cpp's mirostat chain is logit bias, temperature, mirostat: no penalties there.
  if (p.mirostat != 0 && order == engine_order::llama_cpp) {
    if (p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f ||
        p.dry_multiplier > 0.0f)
      bad_param(p.repetition_penalty != 1.0f  ? "repetition_penalty"
                : p.presence_penalty != 0.0f  ? "presence_penalty"
                : p.frequency_penalty != 0.0f ? "frequency_penalty"
                                              : "dry_multiplier",
                "llama.cpp applies no penalty with mirostat");
  }
}

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
  if (p.penalty_last_n < -1) bad_param("penalty_last_n", "must be -1 (all), 0 (none) or a count");
  if (!(p.typical_p > 0.0f && p.typical_p <= 1.0f)) bad_param("typical_p", "must be in (0, 1] (1 disables)");
  if (!std::isfinite(p.top_n_sigma)) bad_param("top_n_sigma", "must be finite (<= 0 disables)");
  if (!(p.xtc_probability >= 0.0f && p.xtc_probability <= 1.0f))
    bad_param("xtc_probability", "must be in [0, 1]");
  if (!(p.xtc_threshold >= 0.0f && p.xtc_threshold <= 1.0f))
    bad_param("xtc_threshold", "must be in [0, 1] (> 0.5 disables)");
  if (!(p.epsilon_cutoff >= 0.0f && p.epsilon_cutoff < 1.0f))
    bad_param("epsilon_cutoff", "must be in [0, 1) (0 disables)");
  if (!(p.eta_cutoff >= 0.0f && p.eta_cutoff < 1.0f))
    bad_param("eta_cutoff", "must be in [0, 1) (0 disables)");
  if (p.min_keep < 1) bad_param("min_keep", "must be >= 1 (1 is no floor; llama.cpp's 0 means 1)");
  if (!std::isfinite(p.dynatemp_range)) bad_param("dynatemp_range", "must be finite (<= 0 disables)");
  if (!(p.dynatemp_exponent >= 0.0f) || std::isinf(p.dynatemp_exponent))
    bad_param("dynatemp_exponent", "must be finite and >= 0");
  if (p.mirostat < 0 || p.mirostat > 2) bad_param("mirostat", "must be 0 (off), 1 or 2");
  if (!(p.mirostat_tau >= 0.0f) || std::isinf(p.mirostat_tau))
    bad_param("mirostat_tau", "must be finite and >= 0");
  if (!(p.mirostat_eta >= 0.0f) || std::isinf(p.mirostat_eta))
    bad_param("mirostat_eta", "must be finite and >= 0");
  if (!(p.dry_multiplier >= 0.0f) || std::isinf(p.dry_multiplier))
    bad_param("dry_multiplier", "must be finite and >= 0 (0 disables)");
  if (!(p.dry_base >= 1.0f) || std::isinf(p.dry_base)) bad_param("dry_base", "must be finite and >= 1");
  if (p.dry_allowed_length < 0) bad_param("dry_allowed_length", "must be >= 0");
  if (p.dry_penalty_last_n < -1) bad_param("dry_penalty_last_n", "must be -1 (all), 0 (none) or a count");
  for (const auto& seq : p.dry_sequence_breakers) {
    if (seq.empty()) bad_param("dry_sequence_breakers", "a breaker must hold at least one token");
    detail::check_ids("dry_sequence_breakers", seq);
  }
  if (p.no_repeat_ngram_size < 0) bad_param("no_repeat_ngram_size", "must be >= 0 (0 disables)");
  check_order(p, order);
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
