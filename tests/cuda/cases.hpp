// Random rows and requests for the GPU sampler's tests, and the two answers they are checked on:
// nc::sampler's and the GPU algorithm's (nucleus/cuda/row_sampler.hpp) with a given block backend.
// Shared by the CPU-side equality test (host_equality.cpp) and the GPU program (gpu_check.cpp).
#pragma once

#include <nucleus/cuda/host_block.hpp>
#include <nucleus/cuda/params.hpp>
#include <nucleus/engine/sampler.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace gpu_cases {

namespace nc = nucleus;

struct row_case {
  nc::engine_order order = nc::engine_order::nucleus;
  nc::sampling_params params;
  nc::logit_dtype dtype = nc::logit_dtype::f32;
  std::vector<float> f32;
  std::vector<nc::bf16> b16;
  std::vector<nc::f16> h16;
  std::uint64_t position = 0;
  std::uint64_t stream = 0;

  std::size_t vocab() const {
    return dtype == nc::logit_dtype::f32    ? f32.size()
           : dtype == nc::logit_dtype::bf16 ? b16.size()
                                            : h16.size();
  }
  nc::draw_key key() const { return {params.seed, position, stream}; }
  // The row's bytes (for the GPU upload).
  const void* data() const {
    return dtype == nc::logit_dtype::f32    ? static_cast<const void*>(f32.data())
           : dtype == nc::logit_dtype::bf16 ? static_cast<const void*>(b16.data())
                                            : static_cast<const void*>(h16.data());
  }
};

// float -> binary16, rounding toward zero (any half is a valid test input; NaN and inf kept).
inline nc::f16 half_rtz(float f) {
  const auto b = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  if ((b & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>(sign | 0x7e00u)};
  const int e = static_cast<int>((b >> 23) & 0xffu) - 127 + 15;
  const std::uint32_t mant = (b & 0x7fffffu) | 0x800000u;
  if (e >= 31) return {static_cast<std::uint16_t>(sign | 0x7c00u)};
  if (e <= 0) {
    if (e < -10) return {sign};
    return {static_cast<std::uint16_t>(sign | (mant >> (14 - e)))};
  }
  return {static_cast<std::uint16_t>(sign | (e << 10) | ((mant >> 13) & 0x3ffu))};
}

template <class T>
T pick(std::mt19937_64& rng, std::initializer_list<T> xs) {
  return *(xs.begin() + std::uniform_int_distribution<std::size_t>(0, xs.size() - 1)(rng));
}

// Logits with the shapes that decide boundaries: spread and peaked rows, heavy ties, constant rows,
// NaN, +-inf, +-0, huge and subnormal values.
inline std::vector<float> random_row(std::mt19937_64& rng, std::size_t v) {
  std::vector<float> x(v);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const int mode = std::uniform_int_distribution<int>(0, 7)(rng);
  const float scale = pick(rng, {0.3f, 1.0f, 3.0f, 10.0f, 40.0f});
  const float c = pick(rng, {0.0f, -0.0f, 1.5f, -7.25f, 60.0f});
  for (std::size_t i = 0; i < v; ++i) {
    float y = normal(rng) * scale;
    switch (mode) {
      case 1:
        y = std::round(y * 2.0f) / 2.0f;  // heavy ties
        break;
      case 2:
        y = std::round(y / scale) * 0.0f + c;  // a constant row (-0 and +0 included)
        break;
      case 3:
        y = std::round(y);
        break;
      case 4:
        y = unit(rng) < 0.5f ? y * 1e30f : y * 1e-39f;  // huge and subnormal
        break;
      default:
        break;
    }
    x[i] = y;
  }
  if (mode == 0 && v > 0) x[std::uniform_int_distribution<std::size_t>(0, v - 1)(rng)] += 25.0f;  // a spike
  // Specials, sprinkled.
  const float nan_p = pick(rng, {0.0f, 0.0f, 0.01f, 0.3f});
  const float ninf_p = pick(rng, {0.0f, 0.0f, 0.05f, 0.6f, 1.0f});
  const float zero_p = pick(rng, {0.0f, 0.0f, 0.1f});
  const int pinf = pick(rng, {0, 0, 0, 0, 1, 3});
  for (std::size_t i = 0; i < v; ++i) {
    const float u = unit(rng);
    if (u < nan_p)
      x[i] = std::numeric_limits<float>::quiet_NaN();
    else if (u < nan_p + ninf_p)
      x[i] = -std::numeric_limits<float>::infinity();
    else if (u < nan_p + ninf_p + zero_p)
      x[i] = unit(rng) < 0.5f ? 0.0f : -0.0f;
  }
  for (int k = 0; k < pinf && v > 0; ++k)
    x[std::uniform_int_distribution<std::size_t>(0, v - 1)(rng)] = std::numeric_limits<float>::infinity();
  return x;
}

// A request over the knobs the GPU implements, valid for its order.
inline nc::sampling_params random_params(std::mt19937_64& rng, nc::engine_order order, std::size_t v) {
  nc::sampling_params p;
  p.temperature = pick(rng, {0.0f, 1e-6f, 1e-39f, 0.25f, 0.7f, 1.0f, 1.0f, 1.6f});
  const auto vi = static_cast<int>(v);
  p.top_k = pick(rng, {0, 0, 1, 2, 5, 40, 1000, std::max(vi - 1, 1), vi, vi + 3});
  p.top_p = pick(rng, {1.0f, 1.0f, 0.999f, 0.9f, 0.5f, 0.1f, 1e-6f});
  p.min_p = pick(rng, {0.0f, 0.0f, 0.02f, 0.3f, 1.0f});
  if (order != nc::engine_order::vllm) p.min_keep = pick(rng, {1, 1, 1, 2, 7, 200});
  p.seed = rng();
  return p;
}

inline row_case random_case(std::mt19937_64& rng, std::size_t v) {
  row_case c;
  c.order = pick(rng, {nc::engine_order::nucleus, nc::engine_order::vllm, nc::engine_order::hf,
                       nc::engine_order::llama_cpp});
  c.params = random_params(rng, c.order, v);
  c.dtype = pick(rng, {nc::logit_dtype::f32, nc::logit_dtype::bf16, nc::logit_dtype::f16});
  const std::vector<float> x = random_row(rng, v);
  if (c.dtype == nc::logit_dtype::f32) c.f32 = x;
  if (c.dtype == nc::logit_dtype::bf16)
    for (float y : x) c.b16.push_back(nc::to_bf16(y));
  if (c.dtype == nc::logit_dtype::f16)
    for (float y : x) c.h16.push_back(half_rtz(y));
  c.position = rng() % 100000;
  c.stream = pick(rng, {std::uint64_t{0}, std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{5}});
  return c;
}

template <class F>
decltype(auto) with_row(const row_case& c, F&& f) {
  if (c.dtype == nc::logit_dtype::bf16) return f(std::span<const nc::bf16>(c.b16));
  if (c.dtype == nc::logit_dtype::f16) return f(std::span<const nc::f16>(c.h16));
  return f(std::span<const float>(c.f32));
}

// nc::sampler's answer.
inline nc::row_result reference(const row_case& c, nc::workspace& ws) {
  const nc::sampler s(c.params, c.order);
  nc::row_request rq;
  rq.position = c.position;
  rq.stream = c.stream;
  return with_row(c, [&](auto row) { return s.sample(row, ws, rq); });
}

// The GPU algorithm's answer, run by the sequential host backend.
inline nucleus::cuda::row_output on_host_block(const row_case& c, nucleus::cuda::host_block& b) {
  const nucleus::cuda::row_params p = nucleus::cuda::make_row_params(c.params, c.order);
  return with_row(c, [&](auto row) {
    return nucleus::cuda::sample_row(b, row.data(), static_cast<std::uint32_t>(row.size()), p, c.key());
  });
}

inline bool same(const nc::row_result& r, const nucleus::cuda::row_output& g) {
  return r.token == g.token &&
         std::bit_cast<std::uint32_t>(r.logprob) == std::bit_cast<std::uint32_t>(g.logprob) &&
         r.status == g.status;
}

inline const char* order_name(nc::engine_order o) {
  return nc::detail::order_info(o).name;
}

inline std::string describe(const row_case& c) {
  const nc::sampling_params& p = c.params;
  return std::string("order=") + order_name(c.order) + " dtype=" + std::to_string(static_cast<int>(c.dtype)) +
         " V=" + std::to_string(c.vocab()) + " T=" + std::to_string(p.temperature) +
         " top_k=" + std::to_string(p.top_k) + " top_p=" + std::to_string(p.top_p) +
         " min_p=" + std::to_string(p.min_p) + " min_keep=" + std::to_string(p.min_keep) +
         " seed=" + std::to_string(p.seed) + " position=" + std::to_string(c.position) +
         " stream=" + std::to_string(c.stream);
}

}  // namespace gpu_cases
