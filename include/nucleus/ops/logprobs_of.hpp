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
#include "nucleus/kernels/reduce.hpp"

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
  using namespace detail;
  const T* x = row.data();
  const std::size_t n = row.size();
  const float m = max_value(x, n);
  if (m == -inf()) {
    for (float& o : out) o = -inf();
    return status::no_candidates;
  }
  if (m == inf()) {
    const std::size_t c = count_greater(x, n, std::numeric_limits<float>::max());
    const auto lp = static_cast<float>(-std::log(static_cast<double>(c)));
    for (std::size_t i = 0; i < ids.size(); ++i) out[i] = to_float(x[ids[i]]) == inf() ? lp : -inf();
    return status::ok;
  }
  const auto lse = static_cast<float>(std::log(exp_sum(x, n, m, 1.0f, nullptr, block_elems)));
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const float xi = to_float(x[ids[i]]);
    out[i] = xi == xi ? (xi - m) - lse : -inf();
  }
  return status::ok;
}

inline status logprobs_of(std::span<const float> row, std::span<const std::int32_t> ids,
                          std::span<float> out) {
  return logprobs_of<float>(row, ids, out);
}

}  // namespace nucleus
