// Speculative verification (engine/speculative.hpp) against the single-token chain at the same V.
// BM_single/V draws one token with the chat knobs (T 0.7, top-p 0.9) through nc::sampler; each
// BM_verify/<draft kind>/k/V verifies k draft tokens plus the bonus row with the same sampler.
// Counter `per_single`: time per verification over BM_single's at the same V, measured in this run;
// the goal is at most k + 1. `k_plus_1` repeats that bound beside it.
#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "nucleus/engine/speculative.hpp"

namespace nc = nucleus;

namespace {

constexpr std::int64_t vocabs[] = {151936, 248320};
std::map<std::int64_t, double> single_ns;  // BM_single's time per draw, by V

// Peaky rows: a few dozen strong logits over a normal background, as a chat model's are.
std::vector<float> peaky_rows(std::size_t rows, std::size_t V, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> n(0.0f, 1.5f);
  std::vector<float> x(rows * V);
  for (float& v : x) v = n(g);
  std::uniform_int_distribution<std::size_t> pick(0, V - 1);
  for (std::size_t r = 0; r < rows; ++r)
    for (int i = 0; i < 30; ++i) x[r * V + pick(g)] += 9.0f + static_cast<float>(i % 5);
  return x;
}

nc::sampler chat_sampler() {
  return nc::sampler(nc::sampling_params{.temperature = 0.7f, .top_p = 0.9f, .seed = 1});
}

void BM_single(benchmark::State& state) {
  const auto V = static_cast<std::size_t>(state.range(0));
  const auto rows = peaky_rows(1, V, 3);
  const nc::sampler s = chat_sampler();
  nc::workspace ws;
  std::uint64_t pos = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    auto r = s.sample<float>({rows.data(), V}, ws, nc::row_request{{}, {}, {}, pos++, nullptr, 0});
    benchmark::DoNotOptimize(r);
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  single_ns[state.range(0)] = ns / static_cast<double>(state.iterations());
}

// with_probs: the draft's distributions are given (a model draft); otherwise one-hot (n-gram). The
// draft tokens are each row's argmax, so most stand and the verification runs through all k rows.
void BM_verify(benchmark::State& state, bool with_probs) {
  const auto k = static_cast<std::size_t>(state.range(0));
  const auto V = static_cast<std::size_t>(state.range(1));
  const auto rows = peaky_rows(k + 1, V, 5);
  std::vector<std::int32_t> draft(k);
  std::vector<float> q;
  for (std::size_t i = 0; i < k; ++i) {
    const float* r = rows.data() + i * V;
    draft[i] = static_cast<std::int32_t>(std::max_element(r, r + V) - r);
  }
  if (with_probs) {
    q.assign(k * V, 0.2f / static_cast<float>(V));
    for (std::size_t i = 0; i < k; ++i) q[i * V + static_cast<std::size_t>(draft[i])] += 0.8f;
  }
  const nc::sampler s = chat_sampler();
  nc::draft_verifier verifier;
  nc::workspace ws;
  std::vector<nc::row_result> out(k + 1);
  std::uint64_t pos = 0, accepted = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const auto r = verifier.verify(s, nc::logits_matrix<float>{rows.data(), k + 1, V, V}, draft, q, ws,
                                   nc::row_request{{}, {}, {}, pos, nullptr, 0}, out);
    pos += k + 1;
    accepted += r.accepted;
    benchmark::DoNotOptimize(out.data());
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  const double per = ns / static_cast<double>(state.iterations());
  if (single_ns.count(state.range(1))) state.counters["per_single"] = per / single_ns[state.range(1)];
  state.counters["k_plus_1"] = static_cast<double>(k + 1);
  state.counters["accepted"] = static_cast<double>(accepted) / static_cast<double>(state.iterations());
}

void register_all() {
  for (std::int64_t V : vocabs) {
    benchmark::RegisterBenchmark("BM_single", BM_single)->Arg(V)->Unit(benchmark::kMicrosecond);
    for (bool probs : {true, false})
      for (std::int64_t k : {1, 4, 8})
        benchmark::RegisterBenchmark(probs ? "BM_verify/draft_probs" : "BM_verify/one_hot",
                                     [probs](benchmark::State& s) { BM_verify(s, probs); })
            ->Args({k, V})
            ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
