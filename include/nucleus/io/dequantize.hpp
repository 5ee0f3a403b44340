// Decodes f16, bf16 and ggml's quantized blocks (Q4_0 to Q8_0, Q2_K to Q6_K) to f32, as gguf-py does.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "nucleus/io/dtype.hpp"
#include "nucleus/io/half.hpp"
#include "nucleus/io/tensor.hpp"

namespace nucleus::io {

static_assert(std::endian::native == std::endian::little,
              "weight files are little-endian; so is this reader");

namespace detail {

// Each kernel spells out the reference's float32 operation order (gguf-py's numpy code, which
// follows ggml): scales are multiplied first, then applied; with -ffp-contract=off (set by the
// nucleus target) nothing fuses, so results are bit-identical.

inline float load_half(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return half_to_float(h);
}

inline std::uint8_t byte_at(const std::byte* p, std::size_t i) {
  return static_cast<std::uint8_t>(p[i]);
}

inline void dequantize_q8_0(const std::byte* src, float* dst, std::size_t n_blocks) {
  for (std::size_t b = 0; b < n_blocks; ++b, src += 34, dst += 32) {
    const float d = load_half(src);
    for (int j = 0; j < 32; ++j)
      dst[j] = static_cast<float>(static_cast<std::int8_t>(byte_at(src + 2, j))) * d;
  }
}

inline void dequantize_q4_0(const std::byte* src, float* dst, std::size_t n_blocks) {
  for (std::size_t b = 0; b < n_blocks; ++b, src += 18, dst += 32) {
    const float d = load_half(src);
    const std::byte* qs = src + 2;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>((byte_at(qs, j) & 0x0f) - 8);
      dst[j + 16] = d * static_cast<float>((byte_at(qs, j) >> 4) - 8);
    }
  }
}

inline void dequantize_q4_1(const std::byte* src, float* dst, std::size_t n_blocks) {
  for (std::size_t b = 0; b < n_blocks; ++b, src += 20, dst += 32) {
    const float d = load_half(src);
    const float m = load_half(src + 2);
    const std::byte* qs = src + 4;
    for (int j = 0; j < 16; ++j) {
      dst[j] = d * static_cast<float>(byte_at(qs, j) & 0x0f) + m;
      dst[j + 16] = d * static_cast<float>(byte_at(qs, j) >> 4) + m;
    }
  }
}

inline void dequantize_q5_0(const std::byte* src, float* dst, std::size_t n_blocks) {
  for (std::size_t b = 0; b < n_blocks; ++b, src += 22, dst += 32) {
    const float d = load_half(src);
    std::uint32_t qh;
    std::memcpy(&qh, src + 2, 4);
    const std::byte* qs = src + 6;
    for (int j = 0; j < 16; ++j) {
      const int lo = (byte_at(qs, j) & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (byte_at(qs, j) >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      dst[j] = d * static_cast<float>(lo - 16);
      dst[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

inline void dequantize_q5_1(const std::byte* src, float* dst, std::size_t n_blocks) {
  for (std::size_t b = 0; b < n_blocks; ++b, src += 24, dst += 32) {
    const float d = load_half(src);
    const float m = load_half(src + 2);
    std::uint32_t qh;
    std::memcpy(&qh, src + 4, 4);
    const std::byte* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      const int lo = (byte_at(qs, j) & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
      const int hi = (byte_at(qs, j) >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
      dst[j] = d * static_cast<float>(lo) + m;
      dst[j + 16] = d * static_cast<float>(hi) + m;
    }
  }
}

// Block of 256 = 16 groups of 16 with a 4-bit scale and 4-bit min each; 2-bit quants, where byte j of
// each 32-byte half carries four values, 32 apart.
inline void dequantize_q2_k(const std::byte* src, float* dst, std::size_t n_blocks) {
  for (std::size_t b = 0; b < n_blocks; ++b, src += 84, dst += 256) {
    const std::byte* scales = src;
    const std::byte* qs = src + 16;
    const float d = load_half(src + 80);
    const float dmin = load_half(src + 82);
    for (int half = 0; half < 2; ++half) {
      for (int shift = 0; shift < 4; ++shift) {
        float* out = dst + half * 128 + shift * 32;
        for (int g = 0; g < 2; ++g) {
          const std::uint8_t sc = byte_at(scales, half * 8 + shift * 2 + g);
          const float dl = d * static_cast<float>(sc & 0x0f);
          const float ml = dmin * static_cast<float>(sc >> 4);
          for (int j = g * 16; j < g * 16 + 16; ++j) {
            out[j] = dl * static_cast<float>((byte_at(qs, half * 32 + j) >> (2 * shift)) & 3) - ml;
          }
        }
      }
    }
  }
}

// 2 low bits as in Q2_K plus a high bit from hmask (bit set means no -4 offset); 16 six-bit signed
// scales packed into 12 bytes.
inline void dequantize_q3_k(const std::byte* src, float* dst, std::size_t n_blocks) {
  for (std::size_t b = 0; b < n_blocks; ++b, src += 110, dst += 256) {
    const std::byte* hmask = src;
    const std::byte* qs = src + 32;
    const std::byte* sc = src + 96;
    const float d = load_half(src + 108);
    for (int group = 0; group < 16; ++group) {
      const int low = group < 8 ? (byte_at(sc, group) & 0x0f) : (byte_at(sc, group - 8) >> 4);
      const int high = (byte_at(sc, 8 + group % 4) >> (2 * (group / 4))) & 3;
      const float dl = d * static_cast<float>((low | (high << 4)) - 32);
      const int half = group / 8;
      const int shift = (group % 8) / 2;
      const int hbit = group / 2;
      for (int j = (group % 2) * 16; j < (group % 2) * 16 + 16; ++j) {
        const int q =
            ((byte_at(qs, half * 32 + j) >> (2 * shift)) & 3) - (((byte_at(hmask, j) >> hbit) & 1) ? 0 : 4);
        dst[group * 16 + j - (group % 2) * 16] = dl * static_cast<float>(q);
      }
    }
  }
}

// Q4_K and Q5_K share 8 sub-blocks of 32 with 6-bit scales and mins packed into 12 bytes.
inline void k_scale_min(const std::byte* s, int sub, int& scale, int& min) {
  if (sub < 4) {
    scale = byte_at(s, sub) & 0x3f;
    min = byte_at(s, sub + 4) & 0x3f;
  } else {
    scale = (byte_at(s, sub + 4) & 0x0f) | ((byte_at(s, sub - 4) >> 2) & 0x30);
    min = (byte_at(s, sub + 4) >> 4) | ((byte_at(s, sub) >> 2) & 0x30);
  }
}

inline void dequantize_q4_k(const std::byte* src, float* dst, std::size_t n_blocks) {
  for (std::size_t b = 0; b < n_blocks; ++b, src += 144, dst += 256) {
    const float d = load_half(src);
    const float dmin = load_half(src + 2);
    const std::byte* scales = src + 4;
    const std::byte* qs = src + 16;
    for (int sub = 0; sub < 8; ++sub) {
      int sc, mn;
      k_scale_min(scales, sub, sc, mn);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(mn);
      const std::byte* q = qs + (sub / 2) * 32;
      const int shift = (sub % 2) * 4;
      float* out = dst + sub * 32;
      for (int j = 0; j < 32; ++j) out[j] = dl * static_cast<float>((byte_at(q, j) >> shift) & 0x0f) - ml;
    }
  }
}

inline void dequantize_q5_k(const std::byte* src, float* dst, std::size_t n_blocks) {
  for (std::size_t b = 0; b < n_blocks; ++b, src += 176, dst += 256) {
    const float d = load_half(src);
    const float dmin = load_half(src + 2);
    const std::byte* scales = src + 4;
    const std::byte* qh = src + 16;
    const std::byte* qs = src + 48;
    for (int sub = 0; sub < 8; ++sub) {
      int sc, mn;
      k_scale_min(scales, sub, sc, mn);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(mn);
      const std::byte* q = qs + (sub / 2) * 32;
      const int shift = (sub % 2) * 4;
      float* out = dst + sub * 32;
      for (int j = 0; j < 32; ++j) {
        const int v = ((byte_at(q, j) >> shift) & 0x0f) | (((byte_at(qh, j) >> sub) & 1) << 4);
        out[j] = dl * static_cast<float>(v) - ml;
      }
    }
  }
}

// 4 low bits from ql (two 64-byte halves, low then high nibble) and 2 high bits from qh (four values
// per byte, 32 apart); 16 signed 8-bit scales.
inline void dequantize_q6_k(const std::byte* src, float* dst, std::size_t n_blocks) {
  for (std::size_t b = 0; b < n_blocks; ++b, src += 210, dst += 256) {
    const std::byte* ql = src;
    const std::byte* qh = src + 128;
    const std::byte* scales = src + 192;
    const float d = load_half(src + 208);
    for (int group = 0; group < 16; ++group) {
      const float dl = d * static_cast<float>(static_cast<std::int8_t>(byte_at(scales, group)));
      const int half = group / 8;
      for (int r = (group % 8) * 16; r < (group % 8) * 16 + 16; ++r) {
        const int low = (byte_at(ql, half * 64 + r % 64) >> (4 * (r / 64))) & 0x0f;
        const int high = (byte_at(qh, half * 32 + r % 32) >> (2 * (r / 32))) & 3;
        dst[half * 128 + r] = dl * static_cast<float>((low | (high << 4)) - 32);
      }
    }
  }
}

}  // namespace detail

// Decodes n = out.size() consecutive elements of type t from src; n must be a whole number of blocks
// and src exactly their bytes. Throws std::invalid_argument otherwise (a caller's mistake: sources
// validate sizes when they open).
inline void dequantize(dtype t, std::span<const std::byte> src, std::span<float> out) {
  const auto per_block = static_cast<std::size_t>(block_elements(t));
  const auto bytes_per_block = static_cast<std::size_t>(block_bytes(t));
  if (out.size() % per_block != 0 || src.size() != out.size() / per_block * bytes_per_block) {
    throw std::invalid_argument("nucleus::io::dequantize: " + std::to_string(src.size()) + " bytes of " +
                                std::string(name(t)) + " cannot decode into " + std::to_string(out.size()) +
                                " floats");
  }
  const std::size_t n_blocks = out.size() / per_block;
  if (n_blocks == 0) return;  // a zero-size tensor: its spans may be null, which memcpy may not get
  const std::byte* p = src.data();
  float* o = out.data();
  switch (t) {
    case dtype::f32:
      std::memcpy(o, p, src.size());
      return;
    case dtype::f16:
      for (std::size_t i = 0; i < n_blocks; ++i) o[i] = detail::load_half(p + 2 * i);
      return;
    case dtype::bf16:
      for (std::size_t i = 0; i < n_blocks; ++i) {
        std::uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        o[i] = bfloat16_to_float(h);
      }
      return;
    case dtype::q8_0:
      detail::dequantize_q8_0(p, o, n_blocks);
      return;
    case dtype::q4_0:
      detail::dequantize_q4_0(p, o, n_blocks);
      return;
    case dtype::q4_1:
      detail::dequantize_q4_1(p, o, n_blocks);
      return;
    case dtype::q5_0:
      detail::dequantize_q5_0(p, o, n_blocks);
      return;
    case dtype::q5_1:
      detail::dequantize_q5_1(p, o, n_blocks);
      return;
    case dtype::q2_k:
      detail::dequantize_q2_k(p, o, n_blocks);
      return;
    case dtype::q3_k:
      detail::dequantize_q3_k(p, o, n_blocks);
      return;
    case dtype::q4_k:
      detail::dequantize_q4_k(p, o, n_blocks);
      return;
    case dtype::q5_k:
      detail::dequantize_q5_k(p, o, n_blocks);
      return;
    case dtype::q6_k:
      detail::dequantize_q6_k(p, o, n_blocks);
      return;
  }
}

// The whole tensor; out.size() must equal t.numel().
inline void dequantize(const tensor_view& t, std::span<float> out) {
  if (out.size() != static_cast<std::size_t>(t.numel())) {
    throw std::invalid_argument("nucleus::io::dequantize: tensor '" + t.name + "' has " +
                                std::to_string(t.numel()) + " elements but the output holds " +
                                std::to_string(out.size()));
  }
  dequantize(t.type, t.bytes, out);
}

inline std::vector<float> dequantize(const tensor_view& t) {
  std::vector<float> out(static_cast<std::size_t>(t.numel()));
  dequantize(t, out);
  return out;
}

// Rows [first, first + count) of the innermost dimension (an embedding look-up without decoding the
// whole table); out.size() must be count * t.cols().
inline void dequantize_rows(const tensor_view& t, std::int64_t first, std::int64_t count,
                            std::span<float> out) {
  if (first < 0 || count < 0 || first > t.rows() || count > t.rows() - first ||
      out.size() != static_cast<std::size_t>(count * t.cols())) {
    throw std::invalid_argument("nucleus::io::dequantize_rows: rows [" + std::to_string(first) + ", +" +
                                std::to_string(count) + ") into " + std::to_string(out.size()) +
                                " floats do not fit tensor '" + t.name + "'");
  }
  const auto row_bytes = static_cast<std::size_t>(t.cols() / block_elements(t.type) * block_bytes(t.type));
  dequantize(t.type,
             t.bytes.subspan(static_cast<std::size_t>(first) * row_bytes,
                             static_cast<std::size_t>(count) * row_bytes),
             out);
}

}  // namespace nucleus::io
