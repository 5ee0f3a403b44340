// A [rows, vocab] view of a model's logits, row-major with a row stride: the input of the batch
// sampler and of speculative verification (a request's k + 1 target rows).
#pragma once

#include <cstddef>
#include <span>

#include "nucleus/core/logit_types.hpp"

namespace nucleus {

// Row r holds data[r * stride .. r * stride + vocab). stride >= vocab, in elements.
template <logit_type T>
struct logits_matrix {
  const T* data = nullptr;
  std::size_t rows = 0;
  std::size_t vocab = 0;
  std::size_t stride = 0;

  std::span<const T> row(std::size_t r) const noexcept { return {data + r * stride, vocab}; }
};

}  // namespace nucleus
