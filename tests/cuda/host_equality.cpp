// The GPU sampler's algorithm (nucleus/cuda/row_sampler.hpp), run by the sequential host backend,
// against nc::sampler: the same token, logprob bits, rank, status and top-n list (ids and logprob
// bits) for every row, with logprobs in both modes and the request processors. The kernels run this
// very code with the CUDA backend; tests/cuda/gpu_check.cpp repeats the comparison on a device.
#include <catch2/catch.hpp>

#include <cstdio>
#include <random>

#include "cases.hpp"

namespace {

namespace nc = nucleus;
using gpu_cases::row_case;

// Cases per vocabulary size: many small rows, fewer of the large ones.
struct tier {
  std::size_t vocab;
  int cases;
};
constexpr tier tiers[] = {{1, 2000}, {1000, 7000}, {32000, 700}, {151936, 100}, {248320, 60}};

// The stages that read the distribution's shape, each with a way to turn it off.
struct shape_knob {
  const char* name;
  bool (*on)(const nc::sampling_params&);
  void (*off)(nc::sampling_params&);
  int floor_on = 1000;  // ok rows with it on, at least (mirostat rows are rarer: two orders)
};
const shape_knob shape_knobs[] = {
    {"top_n_sigma", [](const nc::sampling_params& p) { return p.top_n_sigma > 0.0f; },
     [](nc::sampling_params& p) { p.top_n_sigma = -1.0f; }},
    {"epsilon_cutoff", [](const nc::sampling_params& p) { return p.epsilon_cutoff > 0.0f; },
     [](nc::sampling_params& p) { p.epsilon_cutoff = 0.0f; }},
    {"eta_cutoff", [](const nc::sampling_params& p) { return p.eta_cutoff > 0.0f; },
     [](nc::sampling_params& p) { p.eta_cutoff = 0.0f; }},
    {"xtc", [](const nc::sampling_params& p) { return p.xtc_probability > 0.0f && p.xtc_threshold <= 0.5f; },
     [](nc::sampling_params& p) { p.xtc_probability = 0.0f; }},
    {"dynamic_temperature", [](const nc::sampling_params& p) { return p.dynatemp_range > 0.0f; },
     [](nc::sampling_params& p) { p.dynatemp_range = 0.0f; }},
    {"typical", [](const nc::sampling_params& p) { return p.typical_p < 1.0f; },
     [](nc::sampling_params& p) { p.typical_p = 1.0f; }},
    // Off, a mirostat row (every other stage at its default) is the order's temperature and draw.
    {"mirostat_1", [](const nc::sampling_params& p) { return p.mirostat == 1; },
     [](nc::sampling_params& p) { p.mirostat = 0; }, 250},
    {"mirostat_2", [](const nc::sampling_params& p) { return p.mirostat == 2; },
     [](nc::sampling_params& p) { p.mirostat = 0; }, 250},
};
constexpr std::size_t n_shape = sizeof(shape_knobs) / sizeof(shape_knobs[0]);
static_assert(nucleus::cuda::detail::fold_lanes == nc::detail::partial_sums);
static_assert(nucleus::cuda::detail::mirostat_tokens == nc::mirostat_v1_tokens);

}  // namespace

TEST_CASE("cuda row algorithm, host backend: nc::sampler's bits", "[cuda]") {
  std::mt19937_64 rng(20270127);
  nc::workspace ws;
  nucleus::cuda::host_block block;
  gpu_cases::host_memory memory;
  int total = 0, bad = 0;
  int statuses[4] = {};
  // Rows that exercised each new part and still drew a token, so the test cannot pass by
  // accident (every processor skipped, every list empty).
  int raw_lists = 0, processed_lists = 0, ranked = 0, processed_ok = 0, penalized_ok = 0, full_lists = 0;
  // Per shape stage: ok rows with it on, and those it changed (with that stage off the CPU draws
  // another token or logprob, or keeps another number of candidates), so each is seen to act.
  int shape_on[n_shape] = {}, shape_acted[n_shape] = {};
  for (const tier& t : tiers) {
    for (int i = 0; i < t.cases; ++i) {
      const row_case c = gpu_cases::random_case(rng, t.vocab);
      const auto r = gpu_cases::reference(c, ws);
      const auto g = gpu_cases::on_host_block(c, block, memory);
      ++total;
      ++statuses[static_cast<int>(r.r.status)];
      if (r.r.status == nc::status::ok) {
        if (c.params.logprobs >= 0) ++ranked;
        if (r.r.top_count > 0)
          ++(c.params.logprobs_mode == nc::logprob_mode::raw ? raw_lists : processed_lists);
        if (r.r.top_count == 64) ++full_lists;
        if (gpu_cases::has_processors(c)) ++processed_ok;
        if ((c.params.repetition_penalty != 1.0f || c.params.presence_penalty != 0.0f ||
             c.params.frequency_penalty != 0.0f) &&
            !(c.prompt.empty() && c.output.empty()))
          ++penalized_ok;
        for (std::size_t k = 0; k < n_shape; ++k) {
          if (!shape_knobs[k].on(c.params)) continue;
          ++shape_on[k];
          row_case without = c;
          shape_knobs[k].off(without.params);
          const auto w = gpu_cases::reference(without, ws).r;
          if (w.token != r.r.token || !gpu_cases::same_bits(w.logprob, r.r.logprob) ||
              gpu_cases::kept_count(without, ws) != gpu_cases::kept_count(c, ws))
            ++shape_acted[k];
        }
      }
      if (!gpu_cases::same(r, g)) {
        if (++bad <= 10) {
          std::printf(
              "mismatch: %s\n  cpu token=%d logprob=%a rank=%d top=%u status=%d | gpu token=%d logprob=%a "
              "rank=%d top=%u status=%d\n",
              gpu_cases::describe(c).c_str(), r.r.token, static_cast<double>(r.r.logprob), r.r.rank,
              r.r.top_count, static_cast<int>(r.r.status), g.r.token, static_cast<double>(g.r.logprob),
              g.r.rank, g.r.top_count, static_cast<int>(g.r.status));
          for (std::size_t j = 0; j < r.top.size() && j < g.top.size(); ++j)
            if (r.top[j].token != g.top[j].token ||
                !gpu_cases::same_bits(r.top[j].logprob, g.top[j].logprob)) {
              std::printf("  top[%zu]: cpu %d %a | gpu %d %a\n", j, r.top[j].token,
                          static_cast<double>(r.top[j].logprob), g.top[j].token,
                          static_cast<double>(g.top[j].logprob));
              break;
            }
        }
      }
    }
  }
  std::printf(
      "cuda host backend: %d cases, %d differ (ok %d, no_candidates %d, invalid_input %d); ok rows with "
      "logprobs %d, raw top-n %d, processed top-n %d, 64 entries %d, processors %d, penalties %d\n",
      total, bad, statuses[0], statuses[1], statuses[3], ranked, raw_lists, processed_lists, full_lists,
      processed_ok, penalized_ok);
  CHECK(bad == 0);
  CHECK(total >= 8000);
  CHECK(statuses[0] >= 5000);  // rows that drew a token, not only refusals
  CHECK(statuses[1] >= 500);   // and rows left without candidates (NaN rows, bitmasks)
  CHECK(statuses[3] >= 50);    // and ids past the row (invalid_input)
  CHECK(ranked >= 3000);       // rows with a logprob and rank in a mode
  CHECK(raw_lists >= 1000);
  CHECK(processed_lists >= 1000);
  CHECK(full_lists >= 100);
  CHECK(processed_ok >= 2000);  // rows that drew a token after processors
  CHECK(penalized_ok >= 1000);
  for (std::size_t k = 0; k < n_shape; ++k) {
    std::printf("  %s: %d ok rows, %d changed by it\n", shape_knobs[k].name, shape_on[k], shape_acted[k]);
    CHECK(shape_on[k] >= shape_knobs[k].floor_on);
    CHECK(shape_acted[k] >= 80);
  }
}

TEST_CASE("cuda row params: knobs the GPU lacks are refused by name", "[cuda]") {
  nc::sampling_params q;
  q.dry_multiplier = 0.8f;
  CHECK_THROWS_WITH(nucleus::cuda::make_row_params(q, nc::engine_order::llama_cpp),
                    Catch::Contains("dry_multiplier"));
  nc::sampling_params ngram;
  ngram.no_repeat_ngram_size = 3;
  CHECK_THROWS_WITH(nucleus::cuda::make_row_params(ngram, nc::engine_order::hf),
                    Catch::Contains("no_repeat_ngram_size"));
  nc::sampling_params lists;  // id lists go to the batch's arena
  lists.banned_token_ids = {3};
  CHECK_THROWS_WITH(nucleus::cuda::make_row_params(lists, nc::engine_order::vllm), Catch::Contains("arena"));
  std::vector<std::uint32_t> arena;
  lists.logprobs = 5;
  lists.repetition_penalty = 1.2f;
  const nucleus::cuda::row_params p2 = nucleus::cuda::make_row_params(lists, nc::engine_order::vllm, arena);
  CHECK(p2.banned.size == 1);
  CHECK(arena.size() == 1);
  CHECK(p2.logprobs == 5);
  nc::sampling_params bad;
  bad.top_p = 0.0f;
  CHECK_THROWS_WITH(nucleus::cuda::make_row_params(bad, nc::engine_order::hf), Catch::Contains("top_p"));
}

// top-n-sigma's threshold is the least float >= max - n * sigma: rows and n chosen so that the double
// t lies just above a logit that float(t) rounds to, where rounding to nearest would keep that logit.
TEST_CASE("cuda row algorithm, host backend: top-n-sigma's threshold rounds up", "[cuda]") {
  std::mt19937_64 rng(27);
  nc::workspace ws;
  nucleus::cuda::host_block block;
  gpu_cases::host_memory memory;
  int hits = 0, bad = 0;
  for (int i = 0; i < 4000 && hits < 200; ++i) {
    row_case c;
    c.order = gpu_cases::pick(rng, {nc::engine_order::nucleus, nc::engine_order::llama_cpp});
    c.params.seed = rng();
    c.position = static_cast<std::uint64_t>(i);
    for (int j = 0; j < 16; ++j)
      c.f32.push_back(1000.0f + static_cast<float>(std::uniform_int_distribution<int>(0, 6)(rng)));
    // sigma as the CPU computes it (exact here: small integers over 1000), in the CPU's order.
    double sum = 0.0;
    for (float x : c.f32) sum += static_cast<double>(x);
    const double mean = sum / 16.0;
    double squares[8] = {};
    for (std::size_t j = 0; j < 16; ++j) {
      const double d = static_cast<double>(c.f32[j]) - mean;
      squares[j % 8] = std::fma(d, d, squares[j % 8]);
    }
    double sq = 0.0;
    for (double s : squares) sq += s;
    const double sigma = std::sqrt(sq / 16.0);
    const float mx = *std::max_element(c.f32.begin(), c.f32.end());
    const float target = c.f32[std::uniform_int_distribution<std::size_t>(0, 15)(rng)];
    if (!(target < mx) || sigma == 0.0) continue;
    float n = static_cast<float>((static_cast<double>(mx) - static_cast<double>(target)) / sigma);
    for (int k = 0; k < 8; ++k, n = std::nextafter(n, 0.0f)) {
      const double t = static_cast<double>(mx) - static_cast<double>(n) * sigma;
      if (static_cast<float>(t) == target && static_cast<double>(target) < t) break;
    }
    const double t = static_cast<double>(mx) - static_cast<double>(n) * sigma;
    if (!(static_cast<float>(t) == target && static_cast<double>(target) < t)) continue;
    c.params.top_n_sigma = n;
    ++hits;
    if (!gpu_cases::same(gpu_cases::reference(c, ws), gpu_cases::on_host_block(c, block, memory))) ++bad;
  }
  std::printf("cuda host backend, top-n-sigma's round-up: %d rows at the boundary, %d differ\n", hits, bad);
  CHECK(bad == 0);
  CHECK(hits >= 100);
}

TEST_CASE("cuda row algorithm, host backend: mirostat's constants and mu", "[cuda]") {
  // Mirostat 1's table is the host's std::log, as the CPU stage computes it at run time.
  for (unsigned i = 0; i + 1 < nucleus::cuda::detail::mirostat_tokens; ++i) {
    volatile double num = i + 2.0, den = i + 1.0;  // at run time, not folded by the compiler
    CHECK(nucleus::cuda::detail::mirostat_log_ratio(i) == std::log(num / den));
  }
  // A mirostat row without its mu: invalid_input, as nc::sampler.
  std::mt19937_64 rng(7);
  gpu_cases::row_case c;
  c.params.mirostat = 2;
  c.f32 = gpu_cases::random_row(rng, 100);
  nucleus::cuda::host_block block;
  std::vector<std::uint32_t> lists;
  const nucleus::cuda::row_params p = nucleus::cuda::make_row_params(c.params, c.order, lists);
  CHECK(nucleus::cuda::sample_row(block, c.f32.data(), 100, p, c.key()).status == nc::status::invalid_input);
  // mu moves on both sides alike (the main test compares its bits): count the rows where it moved.
  nc::workspace ws;
  gpu_cases::host_memory memory;
  int moved = 0, rows = 0;
  for (int i = 0; i < 8000 && rows < 400; ++i) {
    const gpu_cases::row_case r = gpu_cases::random_case(rng, 1000);
    if (r.params.mirostat == 0) continue;
    ++rows;
    const auto a = gpu_cases::reference(r, ws);
    const auto g = gpu_cases::on_host_block(r, block, memory);
    CHECK(gpu_cases::same(a, g));
    if (!gpu_cases::same_bits(a.mu, r.mu)) ++moved;
  }
  std::printf("mirostat: %d rows, mu moved in %d, the same bits on both sides\n", rows, moved);
  CHECK(rows >= 400);
  CHECK(moved >= 150);
}
