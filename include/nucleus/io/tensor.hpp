// tensor_view: one tensor's name, shape, type and bytes as a weight source stores them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nucleus/io/dtype.hpp"

namespace nucleus::io {

// One tensor as a source stores it. Sources check at open time that bytes.size() matches shape and
// type, so consumers can trust it. The bytes may be unaligned: read them with memcpy or dequantize().
struct tensor_view {
  std::string name;
  std::vector<std::int64_t> shape;  // outermost first (numpy order); GGUF's ne[] reversed
  dtype type = dtype::f32;
  std::span<const std::byte> bytes;

  std::int64_t numel() const {
    std::int64_t n = 1;
    for (std::int64_t d : shape) n *= d;
    return n;
  }
  // The innermost dimension: the one quantization blocks run along.
  std::int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  std::int64_t rows() const { return cols() == 0 ? 0 : numel() / cols(); }
};

}  // namespace nucleus::io
