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
  // The step's inputs (row_request): token histories and a bitmask (empty: none).
  std::vector<std::int32_t> prompt, output;
  std::vector<std::uint32_t> bitmask;
  float mu = 0.0f;  // mirostat's mu before the draw (rows with mirostat)

  std::size_t vocab() const {
    return dtype == nc::logit_dtype::f32    ? f32.size()
           : dtype == nc::logit_dtype::bf16 ? b16.size()
                                            : h16.size();
  }
  nc::draw_key key() const { return {params.seed, position, stream}; }
  // The row's top-n list room (nc::sampler's top span and the GPU's top_n).
  std::size_t top_room() const { return params.logprobs > 0 ? static_cast<std::size_t>(params.logprobs) : 0; }
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

// The stages that read the distribution's shape, each on in about half the rows of the orders
// that have it: top-n-sigma, epsilon and eta cutoffs, xtc (its coin on or off), dynamic temperature,
// typical.
inline void random_shape_knobs(std::mt19937_64& rng, nc::sampling_params& p, nc::engine_order order) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  using nc::detail::slot;
  auto has = [&](slot s) { return nc::detail::has_slot(order, s); };
  if (has(slot::sigma) && unit(rng) < 0.5f) p.top_n_sigma = pick(rng, {0.5f, 1.0f, 2.0f, 3.5f, 1e-6f});
  if (has(slot::eps) && unit(rng) < 0.5f) p.epsilon_cutoff = pick(rng, {1e-3f, 0.01f, 0.05f, 0.2f, 0.9f});
  if (has(slot::eta) && unit(rng) < 0.5f) p.eta_cutoff = pick(rng, {1e-3f, 0.01f, 0.05f, 0.2f, 0.9f});
  if (has(slot::xtc) && unit(rng) < 0.5f) {
    p.xtc_probability = pick(rng, {1.0f, 1.0f, 1.0f, 0.5f, 0.1f});
    p.xtc_threshold = pick(rng, {0.0f, 1e-3f, 0.01f, 0.01f, 0.05f, 0.1f, 0.3f, 0.5f, 0.6f});
  }
  if (has(slot::dyn) && unit(rng) < 0.5f) {
    p.dynatemp_range = pick(rng, {0.1f, 0.5f, 1.0f, 3.0f});
    p.dynatemp_exponent = pick(rng, {0.0f, 0.5f, 1.0f, 2.0f});
  }
  if (has(slot::typical) && unit(rng) < 0.5f)
    p.typical_p = pick(rng, {0.05f, 0.2f, 0.5f, 0.9f, 0.95f, 0.999f});
  // Half the time the shape stages act alone: top-k, top-p and min-p would often have cut the row to a
  // few tokens already.
  if (unit(rng) < 0.5f) {
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
  }
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
  random_shape_knobs(rng, p, order);
  // Mirostat, where the order has it, replaces the truncation stages: their knobs at the defaults.
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  if ((order == nc::engine_order::nucleus || order == nc::engine_order::llama_cpp) && unit(rng) < 0.2f) {
    nc::sampling_params m;
    m.temperature = p.temperature;
    m.seed = p.seed;
    m.mirostat = pick(rng, {1, 2});
    m.mirostat_tau = pick(rng, {0.0f, 0.5f, 3.0f, 5.0f, 8.0f});
    m.mirostat_eta = pick(rng, {0.0f, 0.1f, 0.1f, 1.0f});
    return m;
  }
  return p;
}

// Logprobs and, in about half the cases, request processors: bias (duplicate ids, clamping
// values), allowed and banned ids, EOS under min_tokens, the penalties over histories that name the
// row's likely tokens, a bitmask; now and then an id outside the row (invalid_input).
inline void random_processors(std::mt19937_64& rng, row_case& c, const std::vector<float>& x) {
  nc::sampling_params& p = c.params;
  const std::size_t v = x.size();
  p.logprobs = pick(rng, {-1, -1, 0, 0, 1, 2, 5, 20, 64});
  p.logprobs_mode = pick(rng, {nc::logprob_mode::raw, nc::logprob_mode::processed});
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  if (unit(rng) < 0.45f) return;
  // The row's likely tokens (by value, NaN last), so that the edits change what is drawn.
  std::vector<std::int32_t> ids(v);
  for (std::size_t i = 0; i < v; ++i) ids[i] = static_cast<std::int32_t>(i);
  const std::size_t hot = std::min<std::size_t>(v, 8);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(hot), ids.end(),
                    [&](std::int32_t a, std::int32_t b) {
                      const float xa = x[static_cast<std::size_t>(a)], xb = x[static_cast<std::size_t>(b)];
                      return xa == xa && (!(xb == xb) || xa > xb);
                    });
  auto token = [&] {
    if (unit(rng) < 0.5f) return ids[std::uniform_int_distribution<std::size_t>(0, hot - 1)(rng)];
    return static_cast<std::int32_t>(std::uniform_int_distribution<std::size_t>(0, v - 1)(rng));
  };
  auto some = [&](std::vector<std::int32_t>& out, int most) {
    const int n = std::uniform_int_distribution<int>(1, most)(rng);
    for (int i = 0; i < n; ++i) out.push_back(token());
  };
  if (unit(rng) < 0.4f) {
    const int n = std::uniform_int_distribution<int>(1, 12)(rng);
    for (int i = 0; i < n; ++i) {
      const std::int32_t t = i > 0 && unit(rng) < 0.3f ? p.logit_bias.back().token : token();
      p.logit_bias.push_back({t, pick(rng, {-100.0f, -3.5f, 0.7f, 5.0f, 30.0f, 3e38f, -3e38f, 1e-30f})});
    }
  }
  if (unit(rng) < 0.15f) some(p.allowed_token_ids, 40);
  if (unit(rng) < 0.3f) some(p.banned_token_ids, 6);
  if (unit(rng) < 0.2f) {
    some(p.eos_token_ids, 2);
    p.min_tokens = pick(rng, {1, 5, 50});
  }
  if (unit(rng) < 0.5f) p.repetition_penalty = pick(rng, {1.3f, 0.8f, 2.0f, 1.05f});
  if (c.order != nc::engine_order::hf && unit(rng) < 0.5f) {
    p.presence_penalty = pick(rng, {0.0f, 0.5f, -0.3f, 1.5f});
    p.frequency_penalty = pick(rng, {0.0f, 0.25f, -0.1f, 2.0f});
  }
  if (c.order == nc::engine_order::llama_cpp) p.penalty_last_n = pick(rng, {64, -1, 0, 5});
  if (p.mirostat != 0 && c.order == nc::engine_order::llama_cpp) {  // llama.cpp: no penalty with mirostat
    p.repetition_penalty = 1.0f;
    p.presence_penalty = p.frequency_penalty = 0.0f;
  }
  const int np = pick(rng, {0, 3, 40, 300}), no = pick(rng, {0, 1, 10, 100});
  for (int i = 0; i < np; ++i) c.prompt.push_back(token());
  for (int i = 0; i < no; ++i) c.output.push_back(token());
  if (unit(rng) < 0.25f) {
    const float density = pick(rng, {0.5f, 0.02f, 0.98f});
    c.bitmask.assign((v + 31) / 32, 0u);
    for (std::size_t i = 0; i < v; ++i)
      if (unit(rng) < density) c.bitmask[i / 32] |= 1u << (i % 32);
  }
  if (unit(rng) < 0.03f) {  // an id past the row: invalid_input on both sides where it is read
    const auto past = static_cast<std::int32_t>(v);
    if (unit(rng) < 0.5f)
      p.banned_token_ids.push_back(past);
    else
      c.output.push_back(past);
  }
}

inline row_case random_case(std::mt19937_64& rng, std::size_t v) {
  row_case c;
  c.order = pick(rng, {nc::engine_order::nucleus, nc::engine_order::vllm, nc::engine_order::hf,
                       nc::engine_order::llama_cpp});
  c.params = random_params(rng, c.order, v);
  c.dtype = pick(rng, {nc::logit_dtype::f32, nc::logit_dtype::bf16, nc::logit_dtype::f16});
  const std::vector<float> x = random_row(rng, v);
  random_processors(rng, c, x);
  if (c.dtype == nc::logit_dtype::f32) c.f32 = x;
  if (c.dtype == nc::logit_dtype::bf16)
    for (float y : x) c.b16.push_back(nc::to_bf16(y));
  if (c.dtype == nc::logit_dtype::f16)
    for (float y : x) c.h16.push_back(half_rtz(y));
  c.position = rng() % 100000;
  c.stream = pick(rng, {std::uint64_t{0}, std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{5}});
  // mu from its start (2 tau) to far off either side: v2 keeping the maximum alone, or every token.
  if (c.params.mirostat != 0)
    c.mu = pick(
        rng, {2.0f * c.params.mirostat_tau, 2.0f * c.params.mirostat_tau, 0.0f, 1.3f, 12.0f, 40.0f, -2.0f});
  return c;
}

template <class F>
decltype(auto) with_row(const row_case& c, F&& f) {
  if (c.dtype == nc::logit_dtype::bf16) return f(std::span<const nc::bf16>(c.b16));
  if (c.dtype == nc::logit_dtype::f16) return f(std::span<const nc::f16>(c.h16));
  return f(std::span<const float>(c.f32));
}

// One answer: the row's result and its top-n list.
template <class Result>
struct answer {
  Result r;
  std::vector<nc::token_logprob> top;
  float mu = 0.0f;  // mirostat's mu after the draw
};

// nc::sampler's answer.
inline answer<nc::row_result> reference(const row_case& c, nc::workspace& ws) {
  const nc::sampler s(c.params, c.order);
  nc::row_request rq;
  rq.position = c.position;
  rq.stream = c.stream;
  rq.prompt = c.prompt;
  rq.output = c.output;
  rq.bitmask = c.bitmask;
  answer<nc::row_result> a;
  a.mu = c.mu;
  if (c.params.mirostat != 0) rq.mirostat_mu = &a.mu;
  a.top.resize(c.top_room());
  a.r = with_row(c, [&](auto row) { return s.sample(row, ws, rq, std::span<nc::token_logprob>(a.top)); });
  a.top.resize(a.r.top_count);
  return a;
}

// How many candidates nc::sampler's processed distribution keeps (0 where the row fails).
inline std::size_t kept_count(const row_case& c, nc::workspace& ws) {
  const nc::sampler s(c.params, c.order);
  nc::row_request rq;
  rq.position = c.position;
  rq.stream = c.stream;
  rq.prompt = c.prompt;
  rq.output = c.output;
  rq.bitmask = c.bitmask;
  float mu = c.mu;
  if (c.params.mirostat != 0) rq.mirostat_mu = &mu;
  return with_row(c, [&](auto row) { return s.process(row, ws, rq).size(); });
}

// The memory a row's GPU run reads and writes besides its logits (on the host here).
struct host_memory {
  std::vector<std::uint32_t> lists;
  std::vector<float> processed;
  std::vector<std::uint32_t> counts;  // all zero between rows
  std::vector<std::int32_t> top_ids;
  std::vector<float> top_logprobs;
};

// The inputs a row_case gives the GPU (pointers into c).
inline nucleus::cuda::row_inputs inputs_of(const row_case& c) {
  nucleus::cuda::row_inputs in;
  in.bitmask = c.bitmask.empty() ? nullptr : c.bitmask.data();
  in.prompt = c.prompt.data();
  in.prompt_size = static_cast<std::uint32_t>(c.prompt.size());
  in.output = c.output.data();
  in.output_size = static_cast<std::uint32_t>(c.output.size());
  return in;
}

// The GPU algorithm's answer, run by the sequential host backend.
inline answer<nucleus::cuda::row_output> on_host_block(const row_case& c, nucleus::cuda::host_block& b,
                                                       host_memory& m) {
  m.lists.clear();
  const nucleus::cuda::row_params p = nucleus::cuda::make_row_params(c.params, c.order, m.lists);
  const std::size_t v = c.vocab();
  m.processed.assign(v, 0.0f);
  if (m.counts.size() < v) m.counts.resize(v, 0u);
  m.top_ids.assign(c.top_room(), -1);
  m.top_logprobs.assign(c.top_room(), 0.0f);
  nucleus::cuda::row_io io;
  io.lists = m.lists.data();
  io.inputs = inputs_of(c);
  io.processed = m.processed.data();
  io.counts = m.counts.data();
  io.top_ids = m.top_ids.data();
  io.top_logprobs = m.top_logprobs.data();
  io.top_capacity = static_cast<std::uint32_t>(c.top_room());
  answer<nucleus::cuda::row_output> a;
  a.mu = c.mu;
  if (c.params.mirostat != 0) io.mirostat_mu = &a.mu;
  a.r = with_row(c, [&](auto row) {
    return nucleus::cuda::sample_row(b, row.data(), static_cast<std::uint32_t>(row.size()), p, c.key(), io);
  });
  for (std::uint32_t i = 0; i < a.r.top_count && i < c.top_room(); ++i)
    a.top.push_back({m.top_ids[i], m.top_logprobs[i]});
  return a;
}

inline bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

// Token, logprob bits, rank, status, and the top-n list (ids and logprob bits).
inline bool same(const nc::row_result& r, const nucleus::cuda::row_output& g) {
  return r.token == g.token && same_bits(r.logprob, g.logprob) && r.rank == g.rank &&
         r.top_count == g.top_count && r.status == g.status;
}
template <class A, class B>
bool same(const answer<A>& a, const answer<B>& b) {
  if (!same(a.r, b.r) || a.top.size() != b.top.size() || !same_bits(a.mu, b.mu)) return false;
  for (std::size_t i = 0; i < a.top.size(); ++i)
    if (a.top[i].token != b.top[i].token || !same_bits(a.top[i].logprob, b.top[i].logprob)) return false;
  return true;
}

// Whether the row runs a processor on the GPU (a list, a penalty or a bitmask).
inline bool has_processors(const row_case& c) {
  const nc::sampling_params& p = c.params;
  return !c.bitmask.empty() || !p.logit_bias.empty() || !p.allowed_token_ids.empty() ||
         !p.banned_token_ids.empty() || (p.min_tokens > 0 && !p.eos_token_ids.empty()) ||
         p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
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
         " sigma=" + std::to_string(p.top_n_sigma) + " eps=" + std::to_string(p.epsilon_cutoff) +
         " eta=" + std::to_string(p.eta_cutoff) + " xtc=" + std::to_string(p.xtc_probability) + "/" +
         std::to_string(p.xtc_threshold) + " dynatemp=" + std::to_string(p.dynatemp_range) + "/" +
         std::to_string(p.dynatemp_exponent) + " typical=" + std::to_string(p.typical_p) +
         " mirostat=" + std::to_string(p.mirostat) + "/" + std::to_string(p.mirostat_tau) + "/" +
         std::to_string(p.mirostat_eta) + "/mu " + std::to_string(c.mu) + " seed=" + std::to_string(p.seed) +
         " position=" + std::to_string(c.position) + " stream=" + std::to_string(c.stream) +
         " logprobs=" + std::to_string(p.logprobs) +
         (p.logprobs_mode == nc::logprob_mode::raw ? "/raw" : "/processed") +
         " bias=" + std::to_string(p.logit_bias.size()) +
         " allowed=" + std::to_string(p.allowed_token_ids.size()) +
         " banned=" + std::to_string(p.banned_token_ids.size()) +
         " eos=" + std::to_string(p.eos_token_ids.size()) + " min_tokens=" + std::to_string(p.min_tokens) +
         " rep=" + std::to_string(p.repetition_penalty) + " presence=" + std::to_string(p.presence_penalty) +
         " freq=" + std::to_string(p.frequency_penalty) + " last_n=" + std::to_string(p.penalty_last_n) +
         " prompt=" + std::to_string(c.prompt.size()) + " output=" + std::to_string(c.output.size()) +
         " bitmask=" + (c.bitmask.empty() ? "no" : "yes");
}

}  // namespace gpu_cases
