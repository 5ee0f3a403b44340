// BM_prefill / BM_decode on SmolLM2-135M-Instruct (scripts/get-model): tokens/s, and the share of
// each decoded token's time spent in sampling (temperature 0.7 | top_p 0.9 | categorical).
//
// Without the model in the cache (or with NUCLEUS_BENCH_SYNTHETIC=1) they run a synthetic model of
// the same shapes (synthetic_model.hpp) instead; each run's label says which. The forward pass costs
// the same either way (the reference model computes in f32 whatever the file stores), but random
// weights give flatter logits than a trained model, so top_p keeps more candidates and the sampling
// share is not the real model's.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nucleus/nucleus.hpp>

#include "../examples/model_common.hpp"
#include "synthetic_model.hpp"

namespace nc = nucleus;

namespace {
constexpr std::int64_t bench_context = 1024;

struct bench_model {
  nc::model::llama net;
  std::string label;  // which model ran, for the report
};

bool synthetic_forced() {
  const char* v = std::getenv("NUCLEUS_BENCH_SYNTHETIC");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

std::unique_ptr<bench_model> load_bench_model() {
  const nc::model::load_options options{bench_context};
  if (const auto path = nc::examples::default_model(); path && !synthetic_forced()) {
    auto file = nc::io::gguf_file::open(*path);
    return std::make_unique<bench_model>(
        bench_model{nc::model::llama::load(file, options), "SmolLM2-135M-Instruct Q4_1"});
  }
  std::fprintf(
      stderr, "nucleus_model_bench: %s; building a synthetic model of SmolLM2-135M's shapes\n",
      synthetic_forced() ? "NUCLEUS_BENCH_SYNTHETIC is set" : "no model in the cache (scripts/get-model)");
  const auto source = nc::bench::make_synthetic_source(nc::bench::smollm2_135m_config());
  return std::make_unique<bench_model>(
      bench_model{nc::model::llama::load(source, options), "synthetic, SmolLM2-135M shapes, f32"});
}

bench_model& model() {
  static const std::unique_ptr<bench_model> m = load_bench_model();
  return *m;
}

std::vector<std::int32_t> prompt_tokens(std::size_t n) {
  std::vector<std::int32_t> t;
  for (std::size_t i = 0; i < n; ++i) t.push_back(static_cast<std::int32_t>(100 + (i * 37) % 1000));
  return t;
}

void BM_prefill(benchmark::State& state) {
  bench_model& m = model();
  state.SetLabel(m.label);
  const auto tokens = prompt_tokens(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) {
    m.net.reset();
    benchmark::DoNotOptimize(m.net.prefill(tokens).data());
  }
  state.counters["tok/s"] =
      benchmark::Counter(static_cast<double>(tokens.size()) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void BM_decode(benchmark::State& state) {
  bench_model& m = model();
  state.SetLabel(m.label);
  const auto chain = nc::temperature(0.7f) | nc::top_p(0.9f) | nc::categorical();
  nc::workspace ws(static_cast<std::size_t>(m.net.vocab()));
  m.net.reset();
  std::span<const float> logits = m.net.prefill(prompt_tokens(16));
  double sampling = 0.0, total = 0.0;
  std::uint64_t pos = 0;
  for (auto _ : state) {
    if (m.net.position() + 1 >= m.net.context()) {
      state.PauseTiming();
      m.net.reset();
      logits = m.net.prefill(prompt_tokens(16));
      state.ResumeTiming();
    }
    const auto t0 = std::chrono::steady_clock::now();
    const nc::sample_result r = chain(logits, ws, nc::draw_key{1, pos++});
    const auto t1 = std::chrono::steady_clock::now();
    logits = m.net.decode(r.token);
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
