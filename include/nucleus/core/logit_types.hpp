// The element types a logit row may hold: float, bfloat16 and IEEE half. 16-bit rows are read by the
// kernels directly (widened to float in registers); the chains make no full-row float copy.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>

#include "nucleus/core/host_device.hpp"

namespace nucleus {

// bfloat16: the top 16 bits of a binary32. A plain bit container, as engines hand it over.
struct bf16 {
  std::uint16_t bits = 0;
  friend bool operator==(bf16, bf16) = default;
};

// IEEE 754 binary16.
struct f16 {
  std::uint16_t bits = 0;
  friend bool operator==(f16, f16) = default;
};

namespace detail {

// Exact binary16 -> binary32 for every input. Integer-only, so flush-to-zero modes cannot touch
// subnormals; NaNs keep their payload unquieted (as numpy converts).
NUCLEUS_HD constexpr float half_bits_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_from_bits(sign);
  // A subnormal half: shift the leading one up to the implicit bit; each shift lowers the exponent.
  std::uint32_t e = 113;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --e;
  }
  return float_from_bits(sign | (e << 23) | ((mantissa & 0x3ffu) << 13));
}

NUCLEUS_HD constexpr float bf16_bits_to_float(std::uint16_t b) noexcept {
  return float_from_bits(static_cast<std::uint32_t>(b) << 16);
}

}  // namespace detail

NUCLEUS_HD constexpr float to_float(float x) noexcept {
  return x;
}
NUCLEUS_HD constexpr float to_float(bf16 x) noexcept {
  return detail::bf16_bits_to_float(x.bits);
}
NUCLEUS_HD constexpr float to_float(f16 x) noexcept {
  return detail::half_bits_to_float(x.bits);
}

// float -> bfloat16, round to nearest even (NaN stays NaN). For tests and for engines that need it.
constexpr bf16 to_bf16(float x) noexcept {
  const auto u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<std::uint16_t>((u >> 16) | 0x40u)};
  const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<std::uint16_t>(rounded >> 16)};
}

template <class T>
concept logit_type = std::same_as<T, float> || std::same_as<T, bf16> || std::same_as<T, f16>;

// What a row holds, for code that dispatches at run time (the batch API).
enum class logit_dtype : std::uint8_t { f32, bf16, f16 };

template <logit_type T>
inline constexpr logit_dtype dtype_of = std::same_as<T, float>  ? logit_dtype::f32
                                        : std::same_as<T, bf16> ? logit_dtype::bf16
                                                                : logit_dtype::f16;

}  // namespace nucleus
