// All the randomness a draw uses: a counter-based generator keyed by (seed, position, stream).
#pragma once

#include <cstdint>

#include "nucleus/core/host_device.hpp"

namespace nucleus {

// There is no hidden generator state: the same key gives the same uniform on every run, thread and
// build. An engine passes the request's seed, the index of the token being generated, and the
// sample's index among a request's n samples (stream 0 is the key without a stream, bit for bit).
struct draw_key {
  std::uint64_t seed = 0;
  std::uint64_t position = 0;
  std::uint64_t stream = 0;

  friend bool operator==(const draw_key&, const draw_key&) = default;
};

namespace detail {

// SplitMix64's finalizer: a bijective 64-bit mix with full avalanche.
NUCLEUS_HD constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// mix64(0) == 0, so stream 0 leaves every earlier draw unchanged; other streams xor in their own
// mixed word, independent of seed and position.
NUCLEUS_HD constexpr std::uint64_t key_bits(draw_key k) noexcept {
  return mix64(k.seed ^ mix64(k.position + 0x9E3779B97F4A7C15ull) ^ mix64(k.stream * 0xC2B2AE3D27D4EB4Full));
}
static_assert(mix64(0) == 0);

// Uniform in [0, 1) with 53 random bits.
NUCLEUS_HD constexpr double uniform(draw_key k) noexcept {
  return static_cast<double>(key_bits(k) >> 11) * 0x1.0p-53;
}

// Independent streams of one key, for stages that flip a coin before the draw (xtc) and for the
// acceptance coin of speculative verification: stream s > 0 never reuses the draw's own bits.
enum class key_stream : std::uint64_t { draw = 0, xtc = 1, verify = 2 };
NUCLEUS_HD constexpr double uniform(draw_key k, key_stream s) noexcept {
  if (s == key_stream::draw) return uniform(k);
  const std::uint64_t bits =
      mix64(key_bits(k) ^ mix64(static_cast<std::uint64_t>(s) * 0xD1B54A32D192ED03ull));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace detail
}  // namespace nucleus
