// What every nucleus benchmark shares: the vocabularies, the peaky logits, one workspace, and the
// floors that turn a time into `passes` (memory) and `exp_floors`.
//
// A time alone says little across machines; the same time divided by the fastest possible read of
// the row (a SIMD sum, BM_onepass) says how many row-reads a sampler costs, which carries over.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <time.h>

#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>

#include "nucleus/nucleus.hpp"

namespace nucleus::bench {

// Llama-2, SmolLM2, Llama-3, Qwen2, Qwen3-Next and Gemma-3 vocabularies.
inline constexpr std::array<std::int64_t, 6> vocab_sizes{32000, 49152, 128256, 151936, 248320, 262144};

using aligned_floats = std::vector<float, xsimd::aligned_allocator<float>>;

// Normal(0, 2.5) with a few spikes at +12..+16: the shape of a confident language model, where a
// handful of tokens hold most of the mass at T <= 1 and the tail matters once T rises.
inline aligned_floats make_peaky_logits(std::size_t vocab, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> body(0.0f, 2.5f);
  aligned_floats x(vocab);
  for (float& v : x) v = body(rng);
  std::uniform_int_distribution<std::size_t> where(0, vocab - 1);
  std::uniform_real_distribution<float> height(12.0f, 16.0f);
  const std::size_t spikes = std::min<std::size_t>(8, vocab);
  for (std::size_t s = 0; s < spikes; ++s) x[where(rng)] = height(rng);
  return x;
}

// One row per vocabulary, built once: every benchmark at the same V reads the same bits.
inline std::span<const float> peaky_logits(std::size_t vocab) {
  static std::map<std::size_t, aligned_floats> rows;
  auto it = rows.find(vocab);
  if (it == rows.end())
    it = rows.emplace(vocab, make_peaky_logits(vocab, 0x6E75636C65757300ull + vocab)).first;
  return {it->second.data(), it->second.size()};
}

// One workspace for the whole run, sized for the largest row, so no benchmark times an allocation.
inline nucleus::workspace& shared_workspace() {
  static nucleus::workspace ws(static_cast<std::size_t>(vocab_sizes.back()));
  return ws;
}

// The memory floor's registers: NEON's on aarch64 (baseline there), else the widest x86 ISA the
// compile flags enable (-march=native).
#if defined(__aarch64__)
using floor_arch = xsimd::neon64;
#else
using floor_arch = xsimd::default_arch;
#endif

// The memory floor: every logit read once, four independent accumulators so the adds never wait on
// one another. Nothing a sampler does can read the row faster.
inline float onepass_sum(const float* x, std::size_t n) noexcept {
  using batch = xsimd::batch<float, floor_arch>;
  constexpr std::size_t w = batch::size;
  batch a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
  std::size_t i = 0;
  for (; i + 4 * w <= n; i += 4 * w) {
    a0 += batch::load_unaligned(x + i);
    a1 += batch::load_unaligned(x + i + w);
    a2 += batch::load_unaligned(x + i + 2 * w);
    a3 += batch::load_unaligned(x + i + 3 * w);
  }
  for (; i + w <= n; i += w) a0 += batch::load_unaligned(x + i);
  float s = xsimd::hadd((a0 + a1) + (a2 + a3));
  for (; i < n; ++i) s += x[i];
  return s;
}

namespace detail {

inline bool& cpu_time_flag() {
  static bool on = false;
  return on;
}

}  // namespace detail

// passes divides wall time (steady_clock) by default. --nucleus_cpu_time divides this thread's CPU
// time instead, which other processes on a shared machine disturb far less.
inline void use_cpu_time_for_passes(bool on) {
  detail::cpu_time_flag() = on;
}

inline double now_ns() noexcept {
#if defined(CLOCK_THREAD_CPUTIME_ID)
  if (detail::cpu_time_flag()) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
  }
#endif
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The exp floor's kernel: sum(exp(x[i] - shift)) over the row. bench/exp_floor.hpp provides SLEEF's;
// a binary without one reports no exp_floors.
struct exp_floor_kernel {
  const char* name = nullptr;  // the exp function it calls, e.g. Sleef_expf16_u10avx512f
  float (*sum_exp)(const float* x, std::size_t n, float shift) noexcept = nullptr;
};

// The floors a benchmark is measured against: `passes` counts memory floors (BM_onepass), and
// `exp_floors` counts exp floors (BM_expfloor) for the benchmarks that evaluate exp over the row.
enum class row_floor { memory, exp };

namespace detail {

struct baseline_time {
  double total_ns = 0.0;
  double iterations = 0.0;
};

inline std::map<std::size_t, baseline_time>& baselines(row_floor f) {
  static std::map<std::size_t, baseline_time> times[2];
  return times[f == row_floor::exp ? 1 : 0];
}

inline exp_floor_kernel& exp_floor_slot() {
  static exp_floor_kernel k;
  return k;
}

// The shift the exp floor subtracts, as a softmax would: the row's maximum, found outside any timing.
inline float exp_floor_shift(std::size_t vocab) {
  static std::map<std::size_t, float> shifts;
  auto it = shifts.find(vocab);
  if (it == shifts.end()) {
    const std::span<const float> x = peaky_logits(vocab);
    it = shifts.emplace(vocab, *std::max_element(x.begin(), x.end())).first;
  }
  return it->second;
}

inline float floor_pass(row_floor f, std::span<const float> x, float shift) noexcept {
  if (f == row_floor::exp) return exp_floor_slot().sum_exp(x.data(), x.size(), shift);
  return onepass_sum(x.data(), x.size());
}

// Used only when the filter left the floor's benchmark out: a short in-process measurement instead.
inline double calibrate_floor(row_floor f, std::size_t vocab) {
  const std::span<const float> x = peaky_logits(vocab);
  const float shift = exp_floor_shift(vocab);
  for (int i = 0; i < 16; ++i) benchmark::DoNotOptimize(floor_pass(f, x, shift));
  double best = 0.0;
  for (int round = 0; round < 5; ++round) {
    std::int64_t iters = 0;
    const double t0 = now_ns();
    double t1 = t0;
    do {
      benchmark::DoNotOptimize(floor_pass(f, x, shift));
      ++iters;
      t1 = now_ns();
    } while (t1 - t0 < 20e6);
    const double ns = (t1 - t0) / static_cast<double>(iters);
    best = round == 0 ? ns : std::min(best, ns);
  }
  return best;
}

}  // namespace detail

// Makes `k` the exp floor of this run (BM_expfloor and the exp_floors counters); call before run().
inline void use_exp_floor(exp_floor_kernel k) {
  detail::exp_floor_slot() = k;
  benchmark::AddCustomContext("exp_floor", k.name);
}

inline bool have_exp_floor() noexcept {
  return detail::exp_floor_slot().sum_exp != nullptr;
}

// Time-weighted over every run of the floor's benchmark at this V so far (the framework's short
// trial runs weigh little next to the final one, and repetitions average in).
inline void record_floor(row_floor f, std::size_t vocab, double total_ns, std::int64_t iterations) {
  detail::baseline_time& b = detail::baselines(f)[vocab];
  b.total_ns += total_ns;
  b.iterations += static_cast<double>(iterations);
}

inline double floor_ns(row_floor f, std::size_t vocab) {
  detail::baseline_time& b = detail::baselines(f)[vocab];
  if (b.iterations == 0.0) {
    b.total_ns = detail::calibrate_floor(f, vocab);
    b.iterations = 1.0;
  }
  return b.total_ns / b.iterations;
}

inline void record_baseline(std::size_t vocab, double total_ns, std::int64_t iterations) {
  record_floor(row_floor::memory, vocab, total_ns, iterations);
}

// The memory floor's time per row at this V.
inline double baseline_ns(std::size_t vocab) {
  return floor_ns(row_floor::memory, vocab);
}

// Runs the benchmark loop around `body` and reports passes = time per iteration / BM_onepass's and,
// when the benchmark is bounded by exp and the run has an exp floor, exp_floors = the same time /
// BM_expfloor's.
template <class Body>
void run_with_passes(benchmark::State& state, std::size_t vocab, row_floor bounded_by, Body&& body) {
  const bool exp_bound = bounded_by == row_floor::exp && have_exp_floor();
  // Outside the loop: a calibration is never timed.
  const double memory = baseline_ns(vocab);
  const double exp = exp_bound ? floor_ns(row_floor::exp, vocab) : 0.0;
  const double t0 = now_ns();
  for (auto _ : state) body();
  const double t1 = now_ns();
  const double per_iteration = (t1 - t0) / static_cast<double>(state.iterations());
  state.counters["passes"] = per_iteration / memory;
  if (exp_bound) state.counters["exp_floors"] = per_iteration / exp;
}

template <class Body>
void run_with_passes(benchmark::State& state, std::size_t vocab, Body&& body) {
  run_with_passes(state, vocab, row_floor::memory, std::forward<Body>(body));
}

inline void BM_onepass(benchmark::State& state) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x = peaky_logits(vocab);
  const double t0 = now_ns();
  for (auto _ : state) benchmark::DoNotOptimize(onepass_sum(x.data(), x.size()));
  const double total = now_ns() - t0;
  record_baseline(vocab, total, state.iterations());
  state.counters["passes"] = total / static_cast<double>(state.iterations()) / baseline_ns(vocab);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(vocab * sizeof(float)));
}

inline void BM_expfloor(benchmark::State& state) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x = peaky_logits(vocab);
  const float shift = detail::exp_floor_shift(vocab);
  const exp_floor_kernel k = detail::exp_floor_slot();
  const double t0 = now_ns();
  for (auto _ : state) benchmark::DoNotOptimize(k.sum_exp(x.data(), x.size(), shift));
  const double total = now_ns() - t0;
  record_floor(row_floor::exp, vocab, total, state.iterations());
  const double per_iteration = total / static_cast<double>(state.iterations());
  state.counters["passes"] = per_iteration / baseline_ns(vocab);
  state.counters["exp_floors"] = per_iteration / floor_ns(row_floor::exp, vocab);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(vocab * sizeof(float)));
  state.SetLabel(k.name);
}

// Registers the floors for every vocabulary, BM_onepass then (when the run has one) BM_expfloor;
// call before anything that reports passes.
inline void register_onepass() {
  auto* b = benchmark::RegisterBenchmark("BM_onepass", BM_onepass)->Unit(benchmark::kMicrosecond);
  for (std::int64_t v : vocab_sizes) b->Arg(v);
  if (!have_exp_floor()) return;
  auto* e = benchmark::RegisterBenchmark("BM_expfloor", BM_expfloor)->Unit(benchmark::kMicrosecond);
  for (std::int64_t v : vocab_sizes) e->Arg(v);
}

}  // namespace nucleus::bench
