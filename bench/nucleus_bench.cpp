// The nucleus benchmarks: every common sampler chain on peaky logits at real vocabulary sizes, under
// each --nucleus_isa target, each reporting `passes`, its time as a multiple of one SIMD read of the
// row (BM_onepass, run first), and the exp-bound ones also `exp_floors`, the same time as a multiple
// of one SLEEF expf pass plus a sum (BM_expfloor).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

#include <benchmark/benchmark.h>

#include "harness.hpp"
#include "nucleus/nucleus.hpp"

#if defined(NUCLEUS_BENCH_HAVE_SLEEF)
#include "exp_floor.hpp"
#endif

namespace nc = nucleus;
namespace nb = nucleus::bench;

namespace {

// A drawing chain bounded by memory or by exp, with the draw key's position moving every iteration so each
// draw is a new one.
template <class Chain>
void bench_draw(benchmark::State& state, nb::row_floor bounded_by, const Chain& chain) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x = nb::peaky_logits(vocab);
  nc::workspace& ws = nb::shared_workspace();
  std::uint64_t position = 0;
  nb::run_with_passes(state, vocab, bounded_by, [&] {
    nc::sample_result r = chain(x, ws, nc::draw_key{0x5EED, position++});
    benchmark::DoNotOptimize(r);
  });
}

void BM_argmax(benchmark::State& state) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x = nb::peaky_logits(vocab);
  nc::workspace& ws = nb::shared_workspace();
  const auto greedy = nc::argmax();
  nb::run_with_passes(state, vocab, [&] {
    nc::sample_result r = greedy(x, ws);
    benchmark::DoNotOptimize(r);
  });
}

void BM_log_softmax(benchmark::State& state) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x = nb::peaky_logits(vocab);
  nb::aligned_floats out(vocab);
  nb::run_with_passes(state, vocab, nb::row_floor::exp, [&] {
    nc::status s = nc::log_softmax(x, out);
    benchmark::DoNotOptimize(s);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  });
}

void BM_dist(benchmark::State& state) {
  bench_draw(state, nb::row_floor::exp, nc::categorical());
}

void BM_topk_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::memory, nc::top_k(40) | nc::temperature(0.7f) | nc::categorical());
}

void BM_topp_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::exp, nc::temperature(0.7f) | nc::top_p(0.9f) | nc::categorical());
}

void BM_default_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::memory,
             nc::top_k(40) | nc::top_p(0.95f) | nc::min_p(0.05f) | nc::temperature(0.8f) | nc::categorical());
}

void BM_minp_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::memory, nc::min_p(0.05f) | nc::categorical());
}

void BM_flat_topp_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::exp, nc::temperature(2.0f) | nc::top_p(0.9f) | nc::categorical());
}

// The samplers beyond top-k / top-p / min-p, each alone before the draw, at the knobs engines default to.
void BM_typical_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::memory, nc::typical(0.9f) | nc::categorical());
}
void BM_top_n_sigma_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::memory, nc::top_n_sigma(1.0f) | nc::categorical());
}
void BM_xtc_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::memory, nc::xtc(1.0f, 0.1f) | nc::categorical());
}
void BM_epsilon_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::memory, nc::epsilon_cutoff(3e-4f) | nc::categorical());
}
void BM_eta_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::memory, nc::eta_cutoff(3e-4f) | nc::categorical());
}
void BM_dynatemp_chain(benchmark::State& state) {
  bench_draw(state, nb::row_floor::memory, nc::dynamic_temperature(0.8f, 0.5f, 1.0f) | nc::categorical());
}
void BM_mirostat_v2(benchmark::State& state) {
  float mu = nc::mirostat_initial_mu(5.0f);
  bench_draw(state, nb::row_floor::memory, nc::mirostat_v2(5.0f, 0.1f, mu));
}
void BM_mirostat_v1(benchmark::State& state) {
  float mu = nc::mirostat_initial_mu(5.0f);
  bench_draw(state, nb::row_floor::memory, nc::mirostat(5.0f, 0.1f, mu));
}

void BM_top_logprobs(benchmark::State& state) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x = nb::peaky_logits(vocab);
  nc::workspace& ws = nb::shared_workspace();
  nb::run_with_passes(state, vocab, nb::row_floor::exp, [&] {
    std::span<const nc::token_logprob> top = nc::top_logprobs(x, 8, ws);
    benchmark::DoNotOptimize(top.data());
    benchmark::DoNotOptimize(top.size());
  });
}

void register_chains() {
  const std::pair<const char*, void (*)(benchmark::State&)> benches[] = {
      {"BM_argmax", BM_argmax},
      {"BM_log_softmax", BM_log_softmax},
      {"BM_dist", BM_dist},
      {"BM_topk_chain", BM_topk_chain},
      {"BM_topp_chain", BM_topp_chain},
      {"BM_default_chain", BM_default_chain},
      {"BM_minp_chain", BM_minp_chain},
      {"BM_flat_topp_chain", BM_flat_topp_chain},
      {"BM_top_logprobs", BM_top_logprobs},
      {"BM_typical_chain", BM_typical_chain},
      {"BM_top_n_sigma_chain", BM_top_n_sigma_chain},
      {"BM_xtc_chain", BM_xtc_chain},
      {"BM_epsilon_chain", BM_epsilon_chain},
      {"BM_eta_chain", BM_eta_chain},
      {"BM_dynatemp_chain", BM_dynatemp_chain},
      {"BM_mirostat_v2", BM_mirostat_v2},
      {"BM_mirostat_v1", BM_mirostat_v1},
  };
  for (const auto& [name, fn] : benches) nb::register_per_target(name, fn);
}

}  // namespace

int main(int argc, char** argv) {
#if defined(NUCLEUS_BENCH_HAVE_SLEEF)
  const nb::exp_floor_kernel exp_floor = nb::widest_sleef_exp_floor();
  std::fprintf(stderr, "nucleus bench: exp floor: %s plus a sum over the row\n", exp_floor.name);
  nb::use_exp_floor(exp_floor);
#else
  std::fprintf(stderr, "nucleus bench: SLEEF not found when configuring: no exp floor, no exp_floors\n");
#endif
  return nb::run(argc, argv, register_chains);
}
