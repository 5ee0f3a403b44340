// One row across threads: sampler::sample on the whole row (one thread) beside split_sampler, which
// cuts the same row by vocabulary into shards (nucleus/sharded/split.hpp) run inline (1 shard: the
// cost of the rounds alone; 2 shards: the work two threads share) or on a two-thread pool (2 shards).
// BM_onepass runs first, as everywhere.
//
// Counters: `passes` is the time per row over BM_onepass's at the same V; `speedup` is the whole-row
// time over this benchmark's (the whole row's time from earlier in the same run); `rounds` and
// `bytes_per_shard` are the split's exchange. bench/sharded_table.py prints the table from medians.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include "harness.hpp"
#include "nucleus/engine.hpp"
#include "nucleus/sharded/split.hpp"

namespace nc = nucleus;
namespace nb = nucleus::bench;

namespace {

// Qwen2 and Qwen3-Next: the long rows a tensor-parallel LM head splits.
constexpr std::array<std::int64_t, 2> sharded_vocabs{151936, 248320};

// Set when a warm-up result differs from the whole row's; main then exits 1 (the smoke test fails).
bool wrong_result = false;

// uniform(-0.5, 0.5): at T = 1 top-p 0.9's nucleus holds about 90% of the vocabulary, far past the
// shards' leader budget, so the split takes its histogram rounds.
std::span<const float> flat_logits(std::size_t vocab) {
  static std::map<std::size_t, nb::aligned_floats> rows;
  auto it = rows.find(vocab);
  if (it == rows.end()) {
    std::mt19937_64 rng(0x666C6174ull + vocab);
    std::uniform_real_distribution<float> u(-0.5f, 0.5f);
    nb::aligned_floats x(vocab);
    for (float& v : x) v = u(rng);
    it = rows.emplace(vocab, std::move(x)).first;
  }
  return {it->second.data(), it->second.size()};
}

struct knob_set {
  const char* name;
  bool flat;  // the flat row, else common.hpp's peaky one
  nc::sampling_params params;
};

const std::array<knob_set, 6> knob_sets{{
    {"categorical", false, {.temperature = 1.0f, .seed = 1}},
    {"flat_topp", true, {.temperature = 1.0f, .top_p = 0.9f, .seed = 2}},
    {"topp", false, {.temperature = 0.7f, .top_p = 0.9f, .seed = 3}},
    {"topk_topp", false, {.temperature = 0.7f, .top_k = 40, .top_p = 0.9f, .seed = 4}},
    {"minp", false, {.temperature = 1.0f, .min_p = 0.05f, .seed = 5}},
    {"greedy", false, {.temperature = 0.0f, .seed = 6}},
}};

std::span<const float> row_of(const knob_set& k, std::size_t vocab) {
  return k.flat ? flat_logits(vocab) : nb::peaky_logits(vocab);
}

// The whole row's time per row, recorded by BM_whole for the split benchmarks' `speedup`.
std::map<std::pair<std::string, std::size_t>, nb::detail::baseline_time>& whole_times() {
  static std::map<std::pair<std::string, std::size_t>, nb::detail::baseline_time> t;
  return t;
}

nc::thread_pool& pool2() {
  static nc::thread_pool pool(2);
  return pool;
}

void BM_whole(benchmark::State& state, const knob_set& k) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> row = row_of(k, vocab);
  const nc::sampler s(k.params);
  nc::workspace& ws = nb::shared_workspace();
  nc::row_request rq;
  benchmark::DoNotOptimize(s.sample(row, ws, rq));  // warm-up: the first row may size the workspace
  const double t0 = nb::now_ns();
  nb::run_with_passes(state, vocab, [&] {
    ++rq.position;
    nc::row_result r = s.sample(row, ws, rq);
    benchmark::DoNotOptimize(r);
  });
  nb::detail::baseline_time& w = whole_times()[{k.name, vocab}];
  w.total_ns += nb::now_ns() - t0;
  w.iterations += static_cast<double>(state.iterations());
}

// `shards` even cuts on executor ex: 2 shards inline run both shards' work on one thread, which
// bounds what two idle cores could reach (each does half of it, plus the exchange).
template <class Exec>
void BM_split(benchmark::State& state, const knob_set& k, Exec& ex, std::size_t shards) {
  if (ex.concurrency() > 1 && nb::detail::cpu_time_flag()) {
    state.SkipWithError("--nucleus_cpu_time counts only the calling thread: run threaded cases on wall time");
    return;
  }
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> row = row_of(k, vocab);
  const nc::sampler s(k.params);
  nc::split_sampler split(s, shards);
  std::vector<std::size_t> cuts(shards + 1);
  for (std::size_t i = 0; i <= shards; ++i) cuts[i] = vocab * i / shards;
  auto sample = [&](const nc::row_request& rq) {
    return split.sample(row, std::span<const std::size_t>(cuts), rq, {}, ex);
  };
  nc::row_request rq;

  // Untimed, and a check: a few draws must equal the whole row's, bit for bit.
  nc::workspace ws(vocab);
  for (rq.position = 0; rq.position < 4; ++rq.position) {
    const nc::row_result want = s.sample(row, ws, rq);
    const nc::row_result got = sample(rq);
    if (got == want && want.status == nc::status::ok) continue;
    std::fprintf(stderr,
                 "nucleus sharded bench: %s/%zu position %llu: split gave token %d (status %d), "
                 "the whole row %d (%d)\n",
                 k.name, vocab, static_cast<unsigned long long>(rq.position), got.token,
                 static_cast<int>(got.status), want.token, static_cast<int>(want.status));
    wrong_result = true;
    state.SkipWithError("the split result differs from the whole row's");
    return;
  }

  const double t0 = nb::now_ns();
  nb::run_with_passes(state, vocab, [&] {
    ++rq.position;
    nc::row_result r = sample(rq);
    benchmark::DoNotOptimize(r);
  });
  const double per_row = (nb::now_ns() - t0) / static_cast<double>(state.iterations());
  const auto w = whole_times().find({k.name, vocab});
  if (w != whole_times().end() && w->second.iterations > 0)
    state.counters["speedup"] = w->second.total_ns / w->second.iterations / per_row;
  state.counters["rounds"] = static_cast<double>(split.rounds());
  state.counters["bytes_per_shard"] = static_cast<double>(split.bytes_per_shard());
}

// The parallel floor: the exp-sum kernel alone (the draw's main pass) over the whole row on one
// thread, and over its two halves on the two-thread pool, with no protocol at all. Its ratio is what
// this machine's two CPUs give a split row's heaviest pass; split_sampler can only come near it.
void BM_floor_exp_sum(benchmark::State& state, std::size_t threads) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> row = nb::peaky_logits(vocab);
  std::vector<std::uint64_t> blocks(2 * (vocab / nc::detail::block_elems + 2));
  const std::size_t half = vocab / 2;
  nb::run_with_passes(state, vocab, [&] {
    if (threads == 1) {
      benchmark::DoNotOptimize(nc::detail::exp_sum(row.data(), vocab, 16.0f, 1.0f, blocks.data()));
    } else {
      pool2().bulk(2, [&](std::size_t i, std::size_t) {
        const std::size_t n = i == 0 ? half : vocab - half;
        benchmark::DoNotOptimize(
            nc::detail::exp_sum(row.data() + i * half, n, 16.0f, 1.0f,
                                blocks.data() + i * (vocab / nc::detail::block_elems + 2)));
      });
    }
  });
}

void register_sharded() {
  for (std::int64_t vocab : sharded_vocabs)
    for (std::size_t threads : {1, 2})
      benchmark::RegisterBenchmark(("BM_floor/exp_sum/threads:" + std::to_string(threads)).c_str(),
                                   [threads](benchmark::State& s) { BM_floor_exp_sum(s, threads); })
          ->Arg(vocab)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
  for (std::int64_t vocab : sharded_vocabs)
    for (const knob_set& k : knob_sets) {
      const std::string tail = std::string(k.name) + "/";
      benchmark::RegisterBenchmark(("BM_whole/" + tail + "threads:1").c_str(),
                                   [&k](benchmark::State& s) { BM_whole(s, k); })
          ->Arg(vocab)
          ->Unit(benchmark::kMicrosecond);
      for (std::size_t shards : {1, 2})
        benchmark::RegisterBenchmark(
            ("BM_split/" + tail + "shards:" + std::to_string(shards) + "/inline").c_str(),
            [&k, shards](benchmark::State& s) {
              nc::inline_executor ex;
              BM_split(s, k, ex, shards);
            })
            ->Arg(vocab)
            ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("BM_split/" + tail + "shards:2/threads:2").c_str(),
                                   [&k](benchmark::State& s) { BM_split(s, k, pool2(), 2); })
          ->Arg(vocab)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();  // the calling thread's CPU time is only its share
    }
}

}  // namespace

int main(int argc, char** argv) {
  const int rc = nb::run(argc, argv, register_sharded);
  if (rc != 0) return rc;
  if (wrong_result) std::fprintf(stderr, "nucleus sharded bench: a split result was wrong (see above)\n");
  return wrong_result ? 1 : 0;
}
