// Converts the half-precision floats of weight files (binary16, bfloat16) to float.
#pragma once

#include <cstdint>

#include "nucleus/core/logit_types.hpp"

namespace nucleus::io {

// IEEE binary16 -> binary32, exact for every input (the core's conversion; see core/logit_types.hpp).
constexpr float half_to_float(std::uint16_t h) {
  return nucleus::detail::half_bits_to_float(h);
}

// bfloat16 is the top half of a binary32.
constexpr float bfloat16_to_float(std::uint16_t b) {
  return nucleus::detail::bf16_bits_to_float(b);
}

}  // namespace nucleus::io
