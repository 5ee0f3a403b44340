// logprobs_of: raw log-probabilities (log_softmax at T = 1) of given token ids, as evals ask for.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>

#include "nucleus/core/logit_types.hpp"
#include "nucleus/core/result.hpp"
#include "nucleus/ops/normalizer.hpp"
#include "nucleus/simd/targets.hpp"

namespace nucleus {

// out[i] = log softmax(row)[ids[i]], with log_softmax's rules for NaN, -inf and +inf. Throws
// std::invalid_argument for an empty row, out.size() != ids.size() or an id outside [0, V).
// Two passes over the row (max, exp-sum), whatever the number of ids.
template <logit_type T>
status logprobs_of(std::span<const T> row, std::span<const std::int32_t> ids, std::span<float> out) {
  if (row.empty()) throw std::invalid_argument("nucleus::logprobs_of: empty row");
  if (out.size() != ids.size())
    throw std::invalid_argument("nucleus::logprobs_of: out.size() must equal ids.size()");
  for (std::int32_t t : ids)
    if (t < 0 || static_cast<std::size_t>(t) >= row.size())
      throw std::invalid_argument("nucleus::logprobs_of: token id " + std::to_string(t) +
                                  " is outside the row");
  const detail::raw_normalizer norm =
      detail::normalizer_for(row.data(), row.size(), detail::max_value(row.data(), row.size()));
  for (std::size_t i = 0; i < ids.size(); ++i) out[i] = norm(to_float(row[static_cast<std::size_t>(ids[i])]));
  return norm.no_candidates() ? status::no_candidates : status::ok;
}

inline status logprobs_of(std::span<const float> row, std::span<const std::int32_t> ids,
                          std::span<float> out) {
  return logprobs_of<float>(row, ids, out);
}

}  // namespace nucleus
