// The batch sampler: B rows of peaky logits (each row its own), float or bf16, every row drawn with
// the chat knobs through nc::batch_sampler on the calling thread or a two-thread pool, with the
// single-row chain beside it as the reference. BM_onepass runs first, as in nucleus_bench.
//
// Counters: `passes` is the time per iteration (one whole batch) over BM_onepass's at the same V, as
// everywhere in bench/; `per_row_passes` is that divided by B, the figure to compare across B and
// against BM_chain; `rows/s` is throughput on the same clock. bench/batch_goals.py reads the goals.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>

#include "harness.hpp"
#include "nucleus/engine.hpp"

namespace nc = nucleus;
namespace nb = nucleus::bench;

namespace {

// Qwen2 and Qwen3-Next: the vocabularies batched serving cares about here.
constexpr std::array<std::int64_t, 2> batch_vocabs{151936, 248320};
constexpr std::array<std::size_t, 3> batch_sizes{1, 8, 64};
constexpr std::size_t max_batch = 64;

// Set when a warm-up result is wrong; main then exits 1, so the smoke test fails on it.
bool wrong_result = false;

enum class knobs { topp, topk_topp };

const char* knobs_name(knobs k) {
  return k == knobs::topp ? "topp" : "topk_topp";
}

nc::sampling_params chat_params(knobs k, std::uint64_t seed) {
  nc::sampling_params p;
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  if (k == knobs::topk_topp) p.top_k = 40;
  p.seed = seed;
  return p;
}

template <class T>
const char* dtype_name() {
  return std::is_same_v<T, float> ? "f32" : "bf16";
}

template <class T>
using aligned_rows = std::vector<T, xsimd::aligned_allocator<T>>;

// Row r is common.hpp's peaky row from a seed of its own; row 0 is nucleus_bench's row at that V.
std::uint64_t row_seed(std::size_t vocab, std::size_t r) {
  return 0x6E75636C65757300ull + vocab + r * 0x9E3779B97F4A7C15ull;
}

// max_batch rows back to back (stride = V), built once per V; the bf16 rows round the float ones.
template <class T>
const aligned_rows<T>& batch_rows(std::size_t vocab) {
  static std::map<std::size_t, aligned_rows<T>> cache;
  auto it = cache.find(vocab);
  if (it != cache.end()) return it->second;
  aligned_rows<T> m(max_batch * vocab);
  if constexpr (std::is_same_v<T, float>) {
    for (std::size_t r = 0; r < max_batch; ++r) {
      const nb::aligned_floats row = nb::make_peaky_logits(vocab, row_seed(vocab, r));
      std::copy(row.begin(), row.end(), m.begin() + static_cast<std::ptrdiff_t>(r * vocab));
    }
  } else {
    const aligned_rows<float>& f = batch_rows<float>(vocab);
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = nc::to_bf16(f[i]);
  }
  return cache.emplace(vocab, std::move(m)).first->second;
}

// Idle workers wait on a condition variable, so the pool does not disturb the one-thread runs.
nc::thread_pool& pool2() {
  static nc::thread_pool pool(2);
  return pool;
}

// Thread CPU time sees only the calling thread's share of a pooled batch.
bool skip_threaded_on_cpu_time(benchmark::State& state) {
  if (!nb::detail::cpu_time_flag()) return false;
  state.SkipWithError("--nucleus_cpu_time counts only the calling thread: run threaded cases on wall time");
  return true;
}

void report_rows(benchmark::State& state, std::size_t vocab, std::size_t rows_per_iteration) {
  const double passes = state.counters["passes"];
  const double per_row = passes / static_cast<double>(rows_per_iteration);
  state.counters["per_row_passes"] = per_row;
  state.counters["rows/s"] = 1e9 / (per_row * nb::baseline_ns(vocab));
}

template <class T, class Exec>
void BM_batch(benchmark::State& state, knobs k, std::size_t batch, Exec& ex) {
  if (ex.concurrency() > 1 && skip_threaded_on_cpu_time(state)) return;
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const nc::logits_matrix<T> logits{batch_rows<T>(vocab).data(), batch, vocab, vocab};
  std::vector<nc::sampler> samplers;  // one request per row, each with its own seed
  samplers.reserve(batch);
  for (std::size_t r = 0; r < batch; ++r) samplers.push_back(nc::presets::nucleus(chat_params(k, r + 1)));
  std::vector<nc::batch_row> rows(batch);
  for (std::size_t r = 0; r < batch; ++r) rows[r].sampler = &samplers[r];
  std::vector<nc::row_result> out(batch);
  nc::batch_sampler batcher(vocab, ex.concurrency());

  // Warm-up, untimed: the first call on a shape may allocate. Its results must match row by row.
  batcher.sample(logits, rows, out, ex);
  nc::workspace ws(vocab);
  for (std::size_t r = 0; r < batch; ++r) {
    const nc::row_result want = samplers[r].sample(logits.row(r), ws, rows[r].request);
    if (out[r] == want && want.status == nc::status::ok) continue;
    std::fprintf(stderr,
                 "nucleus batch bench: row %zu: batch gave token %d (status %d), one row gave %d (%d)\n", r,
                 out[r].token, static_cast<int>(out[r].status), want.token, static_cast<int>(want.status));
    wrong_result = true;
    state.SkipWithError("the batch result differs from the single-row sampler's");
    return;
  }

  std::uint64_t position = 1;
  nb::run_with_passes(state, vocab, [&] {
    for (nc::batch_row& row : rows) row.request.position = position;
    ++position;
    batcher.sample(logits, rows, out, ex);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  });
  report_rows(state, vocab, batch);
}

// The single-row chain on row 0 only (cache-hot, as nucleus_bench) or cycling through `cycle` rows
// (the memory traffic of a batch of that size).
template <class T, class Chain>
void BM_chain(benchmark::State& state, const Chain& chain, std::size_t cycle) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const T* data = batch_rows<T>(vocab).data();
  nc::workspace& ws = nb::shared_workspace();
  nc::sample_result warm = chain(std::span<const T>(data, vocab), ws, nc::draw_key{1, 0});
  benchmark::DoNotOptimize(warm);
  std::uint64_t position = 1;
  std::size_t r = 0;
  nb::run_with_passes(state, vocab, [&] {
    const std::span<const T> row(data + r * vocab, vocab);
    nc::sample_result s = chain(row, ws, nc::draw_key{r + 1, position++});
    benchmark::DoNotOptimize(s);
    if (++r == cycle) r = 0;
  });
  report_rows(state, vocab, 1);
}

template <class T, class Chain>
void register_chain(const std::string& name, Chain chain, std::size_t cycle, std::int64_t vocab) {
  benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { BM_chain<T>(s, chain, cycle); })
      ->Arg(vocab)
      ->Unit(benchmark::kMicrosecond);
}

template <class T>
void register_dtype(std::int64_t vocab, knobs k) {
  const std::string tail = std::string(knobs_name(k)) + "/" + dtype_name<T>() + "/";
  for (std::size_t cycle : {std::size_t{1}, max_batch}) {
    const std::string name = "BM_chain/" + tail + "rows:" + std::to_string(cycle);
    if (k == knobs::topp) {
      register_chain<T>(name, nc::temperature(0.7f) | nc::top_p(0.9f) | nc::categorical(), cycle, vocab);
    } else {  // the nucleus preset's order: temperature, top_k, top_p (min_p is off)
      register_chain<T>(name, nc::temperature(0.7f) | nc::top_k(40) | nc::top_p(0.9f) | nc::categorical(),
                        cycle, vocab);
    }
  }
  for (std::size_t batch : batch_sizes) {
    const std::string name = "BM_batch/" + tail + "B:" + std::to_string(batch) + "/threads:";
    auto one = [=](benchmark::State& s) {
      nc::inline_executor ex;
      BM_batch<T>(s, k, batch, ex);
    };
    auto two = [=](benchmark::State& s) { BM_batch<T>(s, k, batch, pool2()); };
    benchmark::RegisterBenchmark((name + "1").c_str(), one)->Arg(vocab)->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark((name + "2").c_str(), two)
        ->Arg(vocab)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();  // the calling thread's CPU time is only its share of the batch
  }
}

void register_batch() {
  for (std::int64_t vocab : batch_vocabs)
    for (knobs k : {knobs::topp, knobs::topk_topp}) {
      register_dtype<float>(vocab, k);
      register_dtype<nc::bf16>(vocab, k);
    }
}

}  // namespace

int main(int argc, char** argv) {
  const int rc = nb::run(argc, argv, register_batch);
  if (rc != 0) return rc;
  if (wrong_result) std::fprintf(stderr, "nucleus batch bench: a batch result was wrong (see above)\n");
  return wrong_result ? 1 : 0;
}
