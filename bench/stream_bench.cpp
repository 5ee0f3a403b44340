// Rows that come from memory (issue 25 item 5): a batch as an engine has it. B rows lie back to back
// in a ring of batches at least four times the last-level cache, and every iteration walks to the
// next batch, so each row is read from DRAM once, as an engine's fresh logits are. nucleus_batch_bench
// reuses 64 rows that the cache partly keeps; here nothing is reused.
//
//   BM_stream_floor/<dtype>/B:<n>/<V>           the floor: one SIMD sum over the same walk (bf16 rows
//                                               are summed from their bf16 bytes)
//   BM_stream_floor_2t/<dtype>/B:<n>/<V>        the floor's rows split over thread_pool(2) (B > 1)
//   BM_warm_row/<order>/<knobs>/<dtype>/<V>     the same sampler on a row in cache (the same 64
//                                               rows in turn, each read untimed just before)
//   BM_stream/<order>/<knobs>/<dtype>/B:<n>/threads:<t>/<V>
//                                               nc::batch_sampler, one request (and seed) per row,
//                                               on the calling thread or a thread_pool(2)
//
// Counters (bench/stream_goals.py prints them against the goals): row_ns, the time per row;
// stream_floors, row_ns over the floor's row_ns at the same dtype, B and V; vs_warm_row, row_ns over
// the warm row's (the same order, knobs and dtype: the cost per logit against a row in cache); and on
// threads:2, speedup_2t, one thread's row_ns over two threads' (floor_speedup_2t on the floor's). A floor or
// warm row that the filter left out is measured in-process before the first benchmark that needs it.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <unistd.h>

#include <benchmark/benchmark.h>
#include <xsimd/xsimd.hpp>

#include "harness.hpp"
#include "nucleus/engine.hpp"

namespace nc = nucleus;
namespace nb = nucleus::bench;

namespace {

// Llama-3-class (128k), Qwen2, Qwen3-Next.
constexpr std::array<std::int64_t, 3> stream_vocabs{128000, 151936, 248320};
constexpr std::array<std::size_t, 3> stream_batches{1, 16, 64};
constexpr std::size_t max_batch = 64;
// Distinct rows per V; the ring repeats them. Their addresses, not their contents, decide the traffic.
constexpr std::size_t distinct_rows = 64;

// Set when a warm-up result is wrong; main then exits 1, so the smoke test fails on it.
bool wrong_result = false;

enum class knobs { greedy, topk_topp, topp, minp };
constexpr std::array<knobs, 4> all_knobs{knobs::greedy, knobs::topk_topp, knobs::topp, knobs::minp};

const char* knobs_name(knobs k) {
  switch (k) {
    case knobs::greedy:
      return "greedy";
    case knobs::topk_topp:
      return "topk_topp";
    case knobs::topp:
      return "topp";
    case knobs::minp:
      return "minp";
  }
  return "?";
}

nc::sampling_params make_params(knobs k, std::uint64_t seed) {
  nc::sampling_params p;
  p.seed = seed;
  if (k == knobs::greedy) {
    p.temperature = 0.0f;
    return p;
  }
  p.temperature = 0.7f;
  if (k == knobs::topk_topp) p.top_k = 50;
  if (k == knobs::topk_topp || k == knobs::topp) p.top_p = 0.9f;
  if (k == knobs::minp) p.min_p = 0.05f;
  return p;
}

constexpr std::array<nc::engine_order, 4> all_orders{nc::engine_order::nucleus, nc::engine_order::vllm,
                                                     nc::engine_order::hf, nc::engine_order::llama_cpp};

const char* order_name(nc::engine_order o) {
  switch (o) {
    case nc::engine_order::nucleus:
      return "nucleus";
    case nc::engine_order::vllm:
      return "vllm";
    case nc::engine_order::hf:
      return "hf";
    case nc::engine_order::llama_cpp:
      return "llama_cpp";
  }
  return "?";
}

nc::sampler make_sampler(nc::engine_order o, knobs k, std::uint64_t seed) {
  const nc::sampling_params p = make_params(k, seed);
  switch (o) {
    case nc::engine_order::vllm:
      return nc::presets::vllm(p);
    case nc::engine_order::hf:
      return nc::presets::hf(p);
    case nc::engine_order::llama_cpp:
      return nc::presets::llama_cpp(p);
    case nc::engine_order::nucleus:
      break;
  }
  return nc::presets::nucleus(p);
}

template <class T>
const char* dtype_name() {
  return std::is_same_v<T, float> ? "f32" : "bf16";
}

// ---- The ring ---------------------------------------------------------------------------------

// The last-level cache in bytes: the larger of what sysconf and /sys say (under a hypervisor they can
// disagree tenfold, and a ring sized from the smaller might fit the larger), 0 if neither says.
std::size_t l3_bytes() {
  std::size_t best = 0;
  if (const long s = sysconf(_SC_LEVEL3_CACHE_SIZE); s > 0) best = static_cast<std::size_t>(s);
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    int level = 0;
    std::string size;
    if (!(std::ifstream(dir + "level") >> level) || level != 3) continue;
    if (!(std::ifstream(dir + "size") >> size) || size.empty()) continue;
    std::size_t n = std::strtoull(size.c_str(), nullptr, 10);
    if (size.back() == 'K') n <<= 10;
    if (size.back() == 'M') n <<= 20;
    best = std::max(best, n);
  }
  return best;
}

// 4x the L3, 256 MiB when the L3 is unknown; NUCLEUS_STREAM_RING_MIB overrides (the smoke test
// uses a small ring: it times nothing).
std::size_t ring_target_bytes() {
  if (const char* e = std::getenv("NUCLEUS_STREAM_RING_MIB"); e && std::atoll(e) > 0)
    return static_cast<std::size_t>(std::atoll(e)) << 20;
  const std::size_t l3 = l3_bytes();
  return l3 > 0 ? 4 * l3 : std::size_t{256} << 20;
}

template <class T>
using aligned_rows = std::vector<T, xsimd::aligned_allocator<T>>;

// Row r is common.hpp's peaky row from a seed of its own, as in nucleus_batch_bench.
std::uint64_t row_seed(std::size_t vocab, std::size_t r) {
  return 0x6E75636C65757300ull + vocab + r * 0x9E3779B97F4A7C15ull;
}

// distinct_rows rows back to back, built once per V; the bf16 rows round the float ones. Row 0 is
// the warm row.
template <class T>
const aligned_rows<T>& distinct(std::size_t vocab) {
  static std::map<std::size_t, aligned_rows<T>> cache;
  if (auto it = cache.find(vocab); it != cache.end()) return it->second;
  aligned_rows<T> m(distinct_rows * vocab);
  if constexpr (std::is_same_v<T, float>) {
    for (std::size_t r = 0; r < distinct_rows; ++r) {
      const nb::aligned_floats row = nb::make_peaky_logits(vocab, row_seed(vocab, r));
      std::copy(row.begin(), row.end(), m.begin() + static_cast<std::ptrdiff_t>(r * vocab));
    }
  } else {
    const aligned_rows<float>& f = distinct<float>(vocab);
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = nc::to_bf16(f[i]);
  }
  return cache.emplace(vocab, std::move(m)).first->second;
}

// One buffer, refilled when the dtype or V changes (benchmarks are registered V by V, dtype by
// dtype, so a whole run refills it six times). The cursor is global: a benchmark continues where the
// last one stopped, so no run starts on rows that the previous one left in cache.
struct ring_state {
  struct free_deleter {
    void operator()(std::byte* p) const noexcept { std::free(p); }
  };
  std::unique_ptr<std::byte, free_deleter> data;
  std::size_t capacity = 0;  // bytes
  std::size_t vocab = 0;
  bool bf16 = false;
  std::size_t rows = 0;
  std::size_t cursor = 0;  // the next batch's first row
};

ring_state& ring() {
  static ring_state r;
  return r;
}

template <class T>
void fill_ring(std::size_t vocab) {
  ring_state& r = ring();
  constexpr bool is_bf16 = std::is_same_v<T, nc::bf16>;
  if (r.data && r.vocab == vocab && r.bf16 == is_bf16) return;
  const std::size_t row_bytes = vocab * sizeof(T);
  // At least two of the largest batches, so consecutive batches never overlap.
  r.rows = std::max(ring_target_bytes() / row_bytes, 2 * max_batch);
  const std::size_t bytes = r.rows * row_bytes;
  if (bytes > r.capacity) {  // once per run, unless a small ring must grow to hold two batches
    const std::size_t size = std::max(bytes, ring_target_bytes());
    r.data.reset(static_cast<std::byte*>(std::aligned_alloc(64, (size + 63) / 64 * 64)));
    if (!r.data) {
      std::fprintf(stderr, "nucleus stream bench: cannot allocate a ring of %zu MiB\n", size >> 20);
      std::exit(1);
    }
    r.capacity = size;
  }
  const aligned_rows<T>& src = distinct<T>(vocab);
  T* dst = reinterpret_cast<T*>(r.data.get());
  for (std::size_t row = 0; row < r.rows; ++row)
    std::memcpy(dst + row * vocab, src.data() + (row % distinct_rows) * vocab, row_bytes);
  r.vocab = vocab;
  r.bf16 = is_bf16;
  r.cursor = 0;
}

// The next `batch` contiguous rows of the ring (fill_ring<T> first).
template <class T>
const T* next_batch(std::size_t batch) {
  ring_state& r = ring();
  if (r.cursor + batch > r.rows) r.cursor = 0;
  const T* p = reinterpret_cast<const T*>(r.data.get()) + r.cursor * r.vocab;
  r.cursor += batch;
  return p;
}

// ---- The floor --------------------------------------------------------------------------------

float stream_sum(const float* x, std::size_t n) noexcept {
  return nb::onepass_sum(x, n);
}

// The bf16 floor reads the bf16 bytes: each 32-bit word holds two bf16 logits, widened in registers
// (the high one by a mask, the low one by a shift) and summed, four words in flight.
float stream_sum(const nc::bf16* x, std::size_t n) noexcept {
  using words = xsimd::batch<std::uint32_t, nb::floor_arch>;
  using floats = xsimd::batch<float, nb::floor_arch>;
  constexpr std::size_t w = words::size;  // words per register: 2 * w logits
  const auto* u = reinterpret_cast<const std::uint32_t*>(x);
  const std::size_t nwords = n / 2;
  const words high(0xFFFF0000u);
  floats a0(0.0f), a1(0.0f), a2(0.0f), a3(0.0f);
  auto add = [&](floats& a, const words& v) {
    a += xsimd::bitwise_cast<floats>(v & high);
    a += xsimd::bitwise_cast<floats>(v << 16);
  };
  std::size_t i = 0;
  for (; i + 4 * w <= nwords; i += 4 * w) {
    add(a0, words::load_unaligned(u + i));
    add(a1, words::load_unaligned(u + i + w));
    add(a2, words::load_unaligned(u + i + 2 * w));
    add(a3, words::load_unaligned(u + i + 3 * w));
  }
  for (; i + w <= nwords; i += w) add(a0, words::load_unaligned(u + i));
  float s = xsimd::hadd((a0 + a1) + (a2 + a3));
  for (std::size_t j = 2 * i; j < n; ++j) s += nc::to_float(x[j]);
  return s;
}

// ---- Times measured in this run ---------------------------------------------------------------

struct mean_time {
  double total_ns = 0.0;
  double iterations = 0.0;
  double ns() const { return total_ns / iterations; }
  void add(double total, double n) {
    total_ns += total;
    iterations += n;
  }
};

using floor_key = std::tuple<bool, std::size_t, std::size_t>;  // bf16, B, V
using warm_key = std::tuple<nc::engine_order, knobs, bool, std::size_t>;
using batch_key = std::tuple<nc::engine_order, knobs, bool, std::size_t, std::size_t>;  // ..., B, V

std::map<floor_key, mean_time> floor_row_ns;  // per row
std::map<warm_key, mean_time> warm_row_ns;
std::map<batch_key, double> one_thread_row_ns;  // the latest threads:1 run

// For a floor or warm row the filter left out: the best of five rounds of at least 20 ms, each the
// mean of what `step` timed.
template <class Step>
double calibrate(Step&& step) {
  for (int i = 0; i < 4; ++i) step();
  double best = 0.0;
  for (int round = 0; round < 5; ++round) {
    std::int64_t n = 0;
    double timed = 0.0;
    for (const double t0 = nb::now_ns(); nb::now_ns() - t0 < 20e6; ++n) timed += step();
    const double ns = timed / static_cast<double>(n);
    best = round == 0 ? ns : std::min(best, ns);
  }
  return best;
}

// One streaming read of the next batch; returns its time.
template <class T>
double floor_step(std::size_t batch, std::size_t vocab) {
  const T* x = next_batch<T>(batch);
  const double t0 = nb::now_ns();
  benchmark::DoNotOptimize(stream_sum(x, batch * vocab));
  return nb::now_ns() - t0;
}

template <class T>
double floor_ns(std::size_t batch, std::size_t vocab) {
  mean_time& m = floor_row_ns[{std::is_same_v<T, nc::bf16>, batch, vocab}];
  if (m.iterations == 0.0) {
    fill_ring<T>(vocab);
    m.add(calibrate([&] { return floor_step<T>(batch, vocab); }) / static_cast<double>(batch), 1.0);
  }
  return m.ns();
}

// The sampler on a row in cache: the ring's 64 distinct rows in turn (the same contents as the
// batches, whose cost varies from row to row), each read once untimed just before it is sampled.
template <class T>
struct warm_row {
  nc::sampler sampler;
  const T* rows;
  std::size_t vocab;
  std::size_t next = 0;
  nc::workspace ws;
  nc::row_request request;
  warm_row(nc::engine_order o, knobs k, std::size_t v)
      : sampler(make_sampler(o, k, 1)), rows(distinct<T>(v).data()), vocab(v), ws(v) {}
  // Returns the time of the sample alone.
  double step() {
    const std::span<const T> row(rows + next * vocab, vocab);
    next = (next + 1) % distinct_rows;
    benchmark::DoNotOptimize(stream_sum(row.data(), vocab));
    ++request.position;
    const double t0 = nb::now_ns();
    nc::row_result r = sampler.sample(row, ws, request);
    benchmark::DoNotOptimize(r);
    return nb::now_ns() - t0;
  }
};

template <class T>
double warm_ns(nc::engine_order o, knobs k, std::size_t vocab) {
  mean_time& m = warm_row_ns[{o, k, std::is_same_v<T, nc::bf16>, vocab}];
  if (m.iterations == 0.0) {
    warm_row<T> w(o, k, vocab);
    m.add(calibrate([&] { return w.step(); }), 1.0);
  }
  return m.ns();
}

// ---- Benchmarks -------------------------------------------------------------------------------

template <class T>
void BM_stream_floor(benchmark::State& state, std::size_t batch) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  fill_ring<T>(vocab);
  double total = 0.0;
  for (auto _ : state) total += floor_step<T>(batch, vocab);
  const auto n = static_cast<double>(state.iterations());
  floor_row_ns[{std::is_same_v<T, nc::bf16>, batch, vocab}].add(total / static_cast<double>(batch), n);
  state.counters["row_ns"] = total / n / static_cast<double>(batch);
  state.counters["stream_floors"] = state.counters["row_ns"] / floor_ns<T>(batch, vocab);
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(batch * vocab * sizeof(T)));
}

template <class T>
void BM_warm_row(benchmark::State& state, nc::engine_order o, knobs k) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  warm_row<T> w(o, k, vocab);
  w.step();  // untimed: the first call may size the workspace
  double total = 0.0;
  for (auto _ : state) total += w.step();
  const auto n = static_cast<double>(state.iterations());
  warm_row_ns[{o, k, std::is_same_v<T, nc::bf16>, vocab}].add(total, n);
  state.counters["row_ns"] = total / n;
}

// Idle workers wait on a condition variable, so the pool does not disturb the one-thread runs.
nc::thread_pool& pool2() {
  static nc::thread_pool pool(2);
  return pool;
}

// The floor on two threads: the batch's rows split over thread_pool(2), each summed by one thread
// (wall time). floor_speedup_2t, one thread's floor over this, is what two threads can gain from the
// memory system itself, the ceiling of BM_stream's speedup_2t on memory-bound chains.
template <class T>
void BM_stream_floor_2t(benchmark::State& state, std::size_t batch) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const double one_thread = floor_ns<T>(batch, vocab);
  fill_ring<T>(vocab);
  std::array<float, max_batch> sums{};
  double total = 0.0;
  for (auto _ : state) {
    const T* x = next_batch<T>(batch);
    const double t0 = nb::now_ns();
    pool2().bulk(batch, [&](std::size_t r, std::size_t) { sums[r] = stream_sum(x + r * vocab, vocab); });
    benchmark::DoNotOptimize(sums.data());
    total += nb::now_ns() - t0;
  }
  const double row_ns = total / static_cast<double>(state.iterations()) / static_cast<double>(batch);
  state.counters["row_ns"] = row_ns;
  state.counters["floor_speedup_2t"] = one_thread / row_ns;
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(batch * vocab * sizeof(T)));
}

template <class T, class Exec>
void BM_stream(benchmark::State& state, nc::engine_order o, knobs k, std::size_t batch, Exec& ex) {
  const std::size_t threads = ex.concurrency();
  if (threads > 1 && nb::detail::cpu_time_flag()) {
    state.SkipWithError("--nucleus_cpu_time counts only the calling thread: run threaded cases on wall time");
    return;
  }
  const auto vocab = static_cast<std::size_t>(state.range(0));
  constexpr bool is_bf16 = std::is_same_v<T, nc::bf16>;
  // Outside the timing: a floor or warm row the filter left out is measured now.
  const double floor = floor_ns<T>(batch, vocab);
  const double warm = warm_ns<T>(o, k, vocab);
  fill_ring<T>(vocab);

  std::vector<nc::sampler> samplers;  // one request per row, each with its own seed
  samplers.reserve(batch);
  for (std::size_t r = 0; r < batch; ++r) samplers.push_back(make_sampler(o, k, r + 1));
  std::vector<nc::batch_row> rows(batch);
  for (std::size_t r = 0; r < batch; ++r) rows[r].sampler = &samplers[r];
  std::vector<nc::row_result> out(batch);
  nc::batch_sampler batcher(vocab, threads);

  // Warm-up, untimed: the first call on a shape may allocate. Each row must match the single-row
  // sampler on that row alone, same seed and position.
  {
    const nc::logits_matrix<T> logits{next_batch<T>(batch), batch, vocab, vocab};
    batcher.sample(logits, rows, out, ex);
    nc::workspace ws(vocab);
    for (std::size_t r = 0; r < batch; ++r) {
      const nc::row_result want = samplers[r].sample(logits.row(r), ws, rows[r].request);
      if (out[r] == want && want.status == nc::status::ok) continue;
      std::fprintf(stderr,
                   "nucleus stream bench: %s/%s/%s B=%zu V=%zu row %zu: batch gave token %d (status %d), "
                   "one row gave %d (%d)\n",
                   order_name(o), knobs_name(k), dtype_name<T>(), batch, vocab, r, out[r].token,
                   static_cast<int>(out[r].status), want.token, static_cast<int>(want.status));
      wrong_result = true;
      state.SkipWithError("the batch result differs from the single-row sampler's");
      return;
    }
  }

  std::uint64_t position = 1;
  const double t0 = nb::now_ns();
  for (auto _ : state) {
    const nc::logits_matrix<T> logits{next_batch<T>(batch), batch, vocab, vocab};
    for (nc::batch_row& row : rows) row.request.position = position;
    ++position;
    batcher.sample(logits, rows, out, ex);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double row_ns =
      (nb::now_ns() - t0) / static_cast<double>(state.iterations()) / static_cast<double>(batch);
  state.counters["row_ns"] = row_ns;
  state.counters["stream_floors"] = row_ns / floor;
  state.counters["vs_warm_row"] = row_ns / warm;
  state.counters["rows/s"] = 1e9 / row_ns;
  const batch_key key{o, k, is_bf16, batch, vocab};
  if (threads == 1) {
    one_thread_row_ns[key] = row_ns;
  } else if (auto it = one_thread_row_ns.find(key); it != one_thread_row_ns.end()) {
    state.counters["speedup_2t"] = it->second / row_ns;
  }
}

template <class T>
void register_dtype(std::int64_t vocab) {
  const std::string dt = dtype_name<T>();
  for (std::size_t batch : stream_batches)
    benchmark::RegisterBenchmark(("BM_stream_floor/" + dt + "/B:" + std::to_string(batch)).c_str(),
                                 [=](benchmark::State& s) { BM_stream_floor<T>(s, batch); })
        ->Arg(vocab)
        ->Unit(benchmark::kMicrosecond);
  for (std::size_t batch : stream_batches)
    if (batch > 1)
      benchmark::RegisterBenchmark(("BM_stream_floor_2t/" + dt + "/B:" + std::to_string(batch)).c_str(),
                                   [=](benchmark::State& s) { BM_stream_floor_2t<T>(s, batch); })
          ->Arg(vocab)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
  for (nc::engine_order o : all_orders)
    for (knobs k : all_knobs)
      benchmark::RegisterBenchmark(
          ("BM_warm_row/" + std::string(order_name(o)) + "/" + knobs_name(k) + "/" + dt).c_str(),
          [=](benchmark::State& s) { BM_warm_row<T>(s, o, k); })
          ->Arg(vocab)
          ->Unit(benchmark::kMicrosecond);
  for (nc::engine_order o : all_orders)
    for (knobs k : all_knobs)
      for (std::size_t batch : stream_batches) {
        const std::string name = "BM_stream/" + std::string(order_name(o)) + "/" + knobs_name(k) + "/" + dt +
                                 "/B:" + std::to_string(batch) + "/threads:";
        auto one = [=](benchmark::State& s) {
          nc::inline_executor ex;
          BM_stream<T>(s, o, k, batch, ex);
        };
        auto two = [=](benchmark::State& s) { BM_stream<T>(s, o, k, batch, pool2()); };
        benchmark::RegisterBenchmark((name + "1").c_str(), one)->Arg(vocab)->Unit(benchmark::kMicrosecond);
        benchmark::RegisterBenchmark((name + "2").c_str(), two)
            ->Arg(vocab)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();  // the calling thread's CPU time is only its share of the batch
      }
}

void register_stream() {
  benchmark::AddCustomContext("stream_l3_kib", std::to_string(l3_bytes() >> 10));
  benchmark::AddCustomContext("stream_ring_target_mib", std::to_string(ring_target_bytes() >> 20));
  for (std::int64_t vocab : stream_vocabs) {
    register_dtype<float>(vocab);
    register_dtype<nc::bf16>(vocab);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // 702 benchmarks: a short minimum time unless the command line sets one.
  std::vector<char*> args(argv, argv + argc);
  static char default_min_time[] = "--benchmark_min_time=0.05";
  if (std::none_of(args.begin(), args.end(),
                   [](const char* a) { return std::string_view(a).starts_with("--benchmark_min_time"); }))
    args.push_back(default_min_time);
  const int rc = nb::run(static_cast<int>(args.size()), args.data(), register_stream);
  if (rc != 0) return rc;
  if (wrong_result) std::fprintf(stderr, "nucleus stream bench: a batch result was wrong (see above)\n");
  return wrong_result ? 1 : 0;
}
