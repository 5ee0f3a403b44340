#include <nucleus/io/dequantize.hpp>

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace nucleus::io;

namespace {

// Independent references: one element at a time, straight from the block layouts (ggml's
// block_q*_* structs), in the same float32 operation order as gguf-py.

float ref_half(std::uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 31, mantissa = h & 1023;
  float magnitude;
  if (exponent == 31) {
    if (mantissa != 0)
      return std::bit_cast<float>((std::uint32_t{h & 0x8000u} << 16) | 0x7f800000u |
                                  (std::uint32_t(mantissa) << 13));
    magnitude = INFINITY;
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else {
    magnitude = std::ldexp(static_cast<float>(1024 + mantissa), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

float half_at(const std::vector<std::uint8_t>& b, std::size_t i) {
  return ref_half(static_cast<std::uint16_t>(b[i] | (b[i + 1] << 8)));
}
int bit(std::uint32_t word, int i) {
  return static_cast<int>((word >> i) & 1u);
}

// 6-bit scale and min of sub-block j of a Q4_K/Q5_K block whose 12 scale bytes start at s.
void scale_min_k4(const std::vector<std::uint8_t>& b, std::size_t s, int j, int& sc, int& m) {
  if (j < 4) {
    sc = b[s + j] & 63;
    m = b[s + j + 4] & 63;
  } else {
    sc = (b[s + j + 4] & 0xF) | ((b[s + j - 4] >> 6) << 4);
    m = (b[s + j + 4] >> 4) | ((b[s + j] >> 6) << 4);
  }
}

float reference(dtype t, const std::vector<std::uint8_t>& b, int e) {
  switch (t) {
    case dtype::q8_0:
      return static_cast<float>(static_cast<std::int8_t>(b[2 + e])) * half_at(b, 0);
    case dtype::q4_0: {
      const int q = e < 16 ? (b[2 + e] & 15) : (b[2 + e - 16] >> 4);
      return half_at(b, 0) * static_cast<float>(q - 8);
    }
    case dtype::q4_1: {
      const int q = e < 16 ? (b[4 + e] & 15) : (b[4 + e - 16] >> 4);
      return half_at(b, 0) * static_cast<float>(q) + half_at(b, 2);
    }
    case dtype::q5_0: {
      const std::uint32_t qh = b[2] | (b[3] << 8) | (b[4] << 16) | (std::uint32_t{b[5]} << 24);
      const int q = (e < 16 ? (b[6 + e] & 15) : (b[6 + e - 16] >> 4)) + 16 * bit(qh, e);
      return half_at(b, 0) * static_cast<float>(q - 16);
    }
    case dtype::q5_1: {
      const std::uint32_t qh = b[4] | (b[5] << 8) | (b[6] << 16) | (std::uint32_t{b[7]} << 24);
      const int q = (e < 16 ? (b[8 + e] & 15) : (b[8 + e - 16] >> 4)) + 16 * bit(qh, e);
      return half_at(b, 0) * static_cast<float>(q) + half_at(b, 2);
    }
    case dtype::q2_k: {  // scales[16] qs[64] d dmin
      const int g = e / 16, q = (b[16 + (e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const float dl = half_at(b, 80) * static_cast<float>(b[g] & 15);
      const float ml = half_at(b, 82) * static_cast<float>(b[g] >> 4);
      return dl * static_cast<float>(q) - ml;
    }
    case dtype::q3_k: {  // hmask[32] qs[64] scales[12] d
      const int g = e / 16;
      const int low4 = g < 8 ? (b[96 + g] & 15) : (b[96 + g - 8] >> 4);
      const int high2 = (b[96 + 8 + g % 4] >> (2 * (g / 4))) & 3;
      const int scale = (low4 + 16 * high2) - 32;
      const int q2 = (b[32 + (e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
      const int q = q2 - (bit(b[e % 32], e / 32) ? 0 : 4);
      return (half_at(b, 108) * static_cast<float>(scale)) * static_cast<float>(q);
    }
    case dtype::q4_k:
    case dtype::q5_k: {  // d dmin scales[12] (qh[32]) qs[128]
      int sc, m;
      scale_min_k4(b, 4, e / 32, sc, m);
      const std::size_t qs = t == dtype::q4_k ? 16 : 48;
      int q = (b[qs + (e / 64) * 32 + e % 32] >> (4 * ((e / 32) % 2))) & 15;
      if (t == dtype::q5_k) q += 16 * bit(b[16 + e % 32], e / 32);
      return (half_at(b, 0) * static_cast<float>(sc)) * static_cast<float>(q) -
             half_at(b, 2) * static_cast<float>(m);
    }
    case dtype::q6_k: {  // ql[128] qh[64] scales[16] d
      const int half = e / 128, r = e % 128;
      const int low = (b[half * 64 + r % 64] >> (4 * (r / 64))) & 15;
      const int high = (b[128 + half * 32 + r % 32] >> (2 * (r / 32))) & 3;
      const float dl = half_at(b, 208) * static_cast<float>(static_cast<std::int8_t>(b[192 + e / 16]));
      return dl * static_cast<float>(low + 16 * high - 32);
    }
    default:
      return NAN;
  }
}

std::vector<std::uint8_t> random_block(dtype t, std::mt19937& rng) {
  std::vector<std::uint8_t> b(static_cast<std::size_t>(block_bytes(t)));
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  // Keep the f16 scales finite: clear the top exponent bit of every scale field.
  auto tame = [&](std::size_t at) { b[at + 1] &= 0xbf; };
  switch (t) {
    case dtype::q8_0:
    case dtype::q4_0:
    case dtype::q5_0:
      tame(0);
      break;
    case dtype::q4_1:
    case dtype::q5_1:
    case dtype::q4_k:
    case dtype::q5_k:
      tame(0), tame(2);
      break;
    case dtype::q2_k:
      tame(80), tame(82);
      break;
    case dtype::q3_k:
      tame(108);
      break;
    case dtype::q6_k:
      tame(208);
      break;
    default:
      break;
  }
  return b;
}

bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

}  // namespace

TEST_CASE("half and bfloat16 conversions are exact for every bit pattern", "[io][dequantize]") {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    INFO("bits " << h);
    REQUIRE(same_bits(half_to_float(static_cast<std::uint16_t>(h)), ref_half(static_cast<std::uint16_t>(h))));
    REQUIRE(std::bit_cast<std::uint32_t>(bfloat16_to_float(static_cast<std::uint16_t>(h))) == h << 16);
  }
  CHECK(half_to_float(0x3c00) == 1.0f);
  CHECK(half_to_float(0xc000) == -2.0f);
  CHECK(half_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(bfloat16_to_float(0x3f80) == 1.0f);
}

TEST_CASE("every quantized kernel matches the per-element reference bit for bit", "[io][dequantize]") {
  std::mt19937 rng(1234);
  for (dtype t : {dtype::q8_0, dtype::q4_0, dtype::q4_1, dtype::q5_0, dtype::q5_1, dtype::q2_k, dtype::q3_k,
                  dtype::q4_k, dtype::q5_k, dtype::q6_k}) {
    INFO(name(t));
    const int n_blocks = 64;
    std::vector<std::vector<std::uint8_t>> blocks;
    std::vector<std::byte> packed;
    for (int i = 0; i < n_blocks; ++i) {
      blocks.push_back(random_block(t, rng));
      for (auto x : blocks.back()) packed.push_back(static_cast<std::byte>(x));
    }
    const auto per_block = static_cast<int>(block_elements(t));
    std::vector<float> out(static_cast<std::size_t>(n_blocks * per_block));
    dequantize(t, packed, out);
    int mismatches = 0;
    for (int i = 0; i < n_blocks; ++i) {
      for (int e = 0; e < per_block; ++e) {
        if (!same_bits(out[static_cast<std::size_t>(i * per_block + e)], reference(t, blocks[i], e)))
          ++mismatches;
      }
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("dequantize checks sizes and decodes rows", "[io][dequantize]") {
  std::vector<float> values(6 * 32);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 50.0f;
  tensor_view t{"m", {6, 32}, dtype::f32, std::as_bytes(std::span<const float>(values))};
  CHECK(t.numel() == 192);
  CHECK(t.rows() == 6);
  CHECK(t.cols() == 32);
  CHECK(dequantize(t) == values);

  std::vector<float> wrong(191);
  CHECK_THROWS_AS(dequantize(t, wrong), std::invalid_argument);
  CHECK_THROWS_WITH(dequantize(t, wrong), Catch::Matchers::Contains("'m'"));

  std::vector<float> rows(2 * 32);
  dequantize_rows(t, 3, 2, rows);
  CHECK(std::equal(rows.begin(), rows.end(), values.begin() + 3 * 32));
  CHECK_THROWS_AS(dequantize_rows(t, 5, 2, rows), std::invalid_argument);
  CHECK_THROWS_AS(dequantize_rows(t, -1, 2, rows), std::invalid_argument);

  // Bytes that do not match the type: a caller's mistake, reported.
  const tensor_view bad{"q", {32}, dtype::q8_0, t.bytes.first(33)};
  std::vector<float> out(32);
  CHECK_THROWS_AS(dequantize(bad, out), std::invalid_argument);

  // Rows of a quantized tensor start at whole blocks.
  std::mt19937 rng(5);
  std::vector<std::byte> q;
  for (int i = 0; i < 4; ++i) {
    for (auto x : random_block(dtype::q4_k, rng)) q.push_back(static_cast<std::byte>(x));
  }
  const tensor_view qt{"qk", {2, 512}, dtype::q4_k, q};
  const auto all = dequantize(qt);
  std::vector<float> second(512);
  dequantize_rows(qt, 1, 1, second);
  CHECK(std::equal(second.begin(), second.end(), all.begin() + 512));
}

TEST_CASE("a zero-size tensor dequantizes to nothing", "[io][dequantize]") {
  // Found by tests/fuzz/safetensors: an f32 tensor of shape [0, 3] has null spans, and memcpy with a
  // null pointer is undefined even for 0 bytes (UBSan reports it).
  for (dtype t : {dtype::f32, dtype::f16, dtype::bf16, dtype::q8_0, dtype::q4_k}) {
    const tensor_view empty{"e", {0, 3}, t, {}};
    CHECK(dequantize(empty).empty());
    CHECK_NOTHROW(dequantize(t, {}, {}));
    CHECK_NOTHROW(dequantize_rows(empty, 0, 0, {}));
  }
}
