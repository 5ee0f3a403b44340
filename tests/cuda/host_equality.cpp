// The GPU sampler's algorithm (nucleus/cuda/row_sampler.hpp), run by the sequential host backend,
// against nc::sampler: the same token, logprob bits and status for every row. The kernels run this
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
constexpr tier tiers[] = {{1, 2000}, {1000, 5000}, {32000, 700}, {151936, 100}, {248320, 60}};

}  // namespace

TEST_CASE("cuda row algorithm, host backend: nc::sampler's bits", "[cuda]") {
  std::mt19937_64 rng(20270127);
  nc::workspace ws;
  nucleus::cuda::host_block block;
  int total = 0, bad = 0;
  int statuses[4] = {};
  for (const tier& t : tiers) {
    for (int i = 0; i < t.cases; ++i) {
      const row_case c = gpu_cases::random_case(rng, t.vocab);
      const nc::row_result r = gpu_cases::reference(c, ws);
      const nucleus::cuda::row_output g = gpu_cases::on_host_block(c, block);
      ++total;
      ++statuses[static_cast<int>(r.status)];
      if (!gpu_cases::same(r, g)) {
        if (++bad <= 10)
          std::printf(
              "mismatch: %s\n  cpu token=%d logprob=%a status=%d | gpu token=%d logprob=%a status=%d\n",
              gpu_cases::describe(c).c_str(), r.token, static_cast<double>(r.logprob),
              static_cast<int>(r.status), g.token, static_cast<double>(g.logprob),
              static_cast<int>(g.status));
      }
    }
  }
  std::printf("cuda host backend: %d cases, %d differ (ok %d, no_candidates %d)\n", total, bad, statuses[0],
              statuses[1]);
  CHECK(bad == 0);
  CHECK(total >= 7000);
  CHECK(statuses[0] >= 5000);  // rows that drew a token, not only refusals
  CHECK(statuses[1] >= 500);   // and rows left without candidates (NaN rows, bitmasks)
}

TEST_CASE("cuda row params: knobs the GPU lacks are refused by name", "[cuda]") {
  nc::sampling_params p;
  p.typical_p = 0.5f;
  CHECK_THROWS_WITH(nucleus::cuda::make_row_params(p, nc::engine_order::nucleus),
                    Catch::Contains("typical_p"));
  nc::sampling_params q;
  q.logprobs = 3;
  CHECK_THROWS_WITH(nucleus::cuda::make_row_params(q, nc::engine_order::vllm), Catch::Contains("logprobs"));
  nc::sampling_params bad;
  bad.top_p = 0.0f;
  CHECK_THROWS_WITH(nucleus::cuda::make_row_params(bad, nc::engine_order::hf), Catch::Contains("top_p"));
}
