// BM_prefill / BM_decode on SmolLM2-135M-Instruct (scripts/get-model): tokens/s, and the share of
// each decoded token's time spent in sampling (temperature 0.7 | top_p 0.9 | categorical).
// Skips, saying so, when the model is not in the cache. A synthetic model of the same shapes is
// not built here yet.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include <nucleus/nucleus.hpp>

#include "../examples/model_common.hpp"

namespace nc = nucleus;

namespace {
nc::examples::loaded_model* model() {
  static std::unique_ptr<nc::examples::loaded_model> m = [] {
    auto p = nc::examples::default_model();
    return p ? nc::examples::load_model(*p, 1024) : nullptr;
  }();
  return m.get();
}

std::vector<std::int32_t> prompt_tokens(std::size_t n) {
  std::vector<std::int32_t> t;
  for (std::size_t i = 0; i < n; ++i) t.push_back(static_cast<std::int32_t>(100 + (i * 37) % 1000));
  return t;
}

void BM_prefill(benchmark::State& state) {
  auto* m = model();
  if (!m) return state.SkipWithError("no model: run scripts/get-model");
  const auto tokens = prompt_tokens(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    m->net.reset();
    benchmark::DoNotOptimize(m->net.prefill(tokens).data());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(tokens.size()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_decode(benchmark::State& state) {
  auto* m = model();
  if (!m) return state.SkipWithError("no model: run scripts/get-model");
  const auto chain = nc::temperature(0.7f) | nc::top_p(0.9f) | nc::categorical();
  nc::workspace ws(static_cast<std::size_t>(m->net.vocab()));
  m->net.reset();
  std::span<const float> logits = m->net.prefill(prompt_tokens(16));
  double sampling = 0.0, total = 0.0;
  std::uint64_t pos = 0;
  for (auto _ : state) {
    if (m->net.position() + 1 >= m->net.context()) {
      state.PauseTiming();
      m->net.reset();
      logits = m->net.prefill(prompt_tokens(16));
      state.ResumeTiming();
    }
    const auto t0 = std::chrono::steady_clock::now();
    const nc::sample_result r = chain(logits, ws, nc::draw_key{1, pos++});
    const auto t1 = std::chrono::steady_clock::now();
    logits = m->net.decode(r.token);
    const auto t2 = std::chrono::steady_clock::now();
    sampling += std::chrono::duration<double>(t1 - t0).count();
    total += std::chrono::duration<double>(t2 - t0).count();
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["sampling_share"] = total > 0 ? sampling / total : 0.0;
}
}  // namespace

BENCHMARK(BM_prefill)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_decode)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
