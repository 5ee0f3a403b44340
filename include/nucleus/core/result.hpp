// What a chain returns: the status of a row, a drawn token, a token with its log-probability.
#pragma once

#include <cstdint>
#include <string_view>

namespace nucleus {

enum class status : std::uint8_t {
  ok = 0,
  no_candidates,  // every logit was NaN or -inf: nothing can be drawn
  empty_row,      // the row had no logits at all
  invalid_input,  // a request's token id or bitmask does not fit the row (engine layer); not sampled
};

constexpr std::string_view to_string(status s) noexcept {
  switch (s) {
    case status::ok:
      return "ok";
    case status::no_candidates:
      return "no_candidates";
    case status::empty_row:
      return "empty_row";
    case status::invalid_input:
      return "invalid_input";
  }
  return "unknown";
}

struct sample_result {
  std::int32_t token = -1;  // -1 unless status == ok
  float logprob = 0.0f;     // log-probability of token in the processed distribution (0 when greedy)
  nucleus::status status = nucleus::status::ok;

  friend bool operator==(const sample_result&, const sample_result&) = default;
};

struct token_logprob {
  std::int32_t token = -1;
  float logprob = 0.0f;

  friend bool operator==(const token_logprob&, const token_logprob&) = default;
};

}  // namespace nucleus
