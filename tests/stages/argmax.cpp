// argmax(): the greedy pick: highest logit among the candidates, ties to the lowest id, logprob 0.
#include <catch2/catch.hpp>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::error_log;

TEST_CASE("argmax: matches the reference on every row kind", "[stages][argmax]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0xA46, [&](const nucleus_cases::sweep_row& r) {
    nc::sample_result g = nc::argmax()(r.row, ws);
    std::int32_t want = ref::argmax(r.row);
    ref::status st = ref::candidates(r.row).st;
    std::string e;
    if (nucleus_cases::to_ref(g.status) != st)
      e = std::string("status ") + std::string(nc::to_string(g.status));
    else if (g.token != want)
      e = "token " + std::to_string(g.token) + ", want " + std::to_string(want);
    else if (g.logprob != 0.0f)
      e = "logprob " + std::to_string(g.logprob);
    log.add(e.empty() ? e : nucleus_cases::with_kind(r.kind, "V=" + std::to_string(r.V) + ": " + e));
    // The draw form agrees, whatever the key.
    nc::sample_result k = nc::argmax()(r.row, ws, nc::draw_key{5, 6});
    if (!(k == g)) log.add(nucleus_cases::with_kind(r.kind, "argmax with a key differs"));
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 60);
}

TEST_CASE("argmax: ties go to the lowest id", "[stages][argmax]") {
  nc::workspace ws;
  CHECK(nc::argmax()(std::vector<float>{1.0f, 5.0f, 5.0f, 2.0f}, ws).token == 1);
  CHECK(nc::argmax()(std::vector<float>(1000, -3.0f), ws).token == 0);
  CHECK(nc::argmax()(std::vector<float>{ref::nan, 2.0f, ref::nan, 2.0f}, ws).token == 1);
  CHECK(nc::argmax()(std::vector<float>{4.0f, ref::inf, 9.0f, ref::inf}, ws).token == 1);
  CHECK(nc::argmax()(std::vector<float>{-ref::inf, -1e30f, -ref::inf}, ws).token == 1);
  // A tie far apart, across any SIMD block boundary, and the last element alone.
  std::vector<float> row(70001, 0.0f);
  row[69999] = 3.0f;
  row[33333] = 3.0f;
  CHECK(nc::argmax()(row, ws).token == 33333);
  row[70000] = 3.5f;
  CHECK(nc::argmax()(row, ws).token == 70000);
}

TEST_CASE("argmax: every position can win", "[stages][argmax]") {
  nc::workspace ws;
  for (std::size_t V : {1u, 2u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 33u, 64u, 65u}) {
    for (std::size_t at = 0; at < V; ++at) {
      std::vector<float> row(V, -1.0f);
      row[at] = 1.0f;
      INFO("V=" << V << " at=" << at);
      CHECK(nc::argmax()(row, ws).token == static_cast<std::int32_t>(at));
    }
  }
}

TEST_CASE("argmax at the end of any chain is the global argmax", "[stages][argmax]") {
  ref::rng g(77);
  nc::workspace ws;
  for (int rep = 0; rep < 50; ++rep) {
    auto row =
        ref::make_row(ref::candidate_row_kinds[static_cast<std::size_t>(rep) % 9], 1 + g.below(3000), g);
    std::int32_t want = ref::argmax(row);
    auto chain = nc::temperature(0.3f) | nc::top_k(5) | nc::top_p(0.2f) | nc::min_p(0.9f) | nc::argmax();
    nc::sample_result r = chain(row, ws);
    CHECK(r.token == want);
    CHECK(r.logprob == 0.0f);
    CHECK((nc::min_p(0.5f) | nc::argmax())(row, ws).token == want);
  }
}
