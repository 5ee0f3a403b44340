// temperature(T): logits of every later stage scaled by 1/T; several stages multiply; T = 0 is greedy.
#include <catch2/catch.hpp>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::check_proc;
using nucleus_cases::error_log;
using nucleus_cases::with_kind;

TEST_CASE("temperature: distribution matches the reference on every row kind", "[stages][temperature]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x7E3A, [&](const nucleus_cases::sweep_row& r) {
    std::vector<float> temps =
        r.big ? std::vector<float>{0.7f} : std::vector<float>{0.05f, 0.5f, 1.0f, 1.7f, 4.0f};
    for (float T : temps) {
      ref::stage chain[] = {ref::temperature(T)};
      log.add(with_kind(r.kind, check_proc(nc::temperature(T), r.row, chain, ws)));
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked > 100);
}

TEST_CASE("temperature: a draw is a survivor with the reference logprob", "[stages][temperature]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x7E3B, [&](const nucleus_cases::sweep_row& r) {
    for (float T : {0.3f, 1.0f, 2.5f}) {
      ref::stage chain[] = {ref::temperature(T)};
      for (std::uint64_t pos = 0; pos < (r.big ? 2u : 10u); ++pos)
        log.add(with_kind(
            r.kind, nucleus_cases::check_case(nc::temperature(T), nc::temperature(T) | nc::categorical(),
                                              nucleus_cases::terminal::categorical, r.row, chain, ws,
                                              nc::draw_key{99, pos})));
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 1500);
}

TEST_CASE("temperature: several stages multiply", "[stages][temperature]") {
  ref::rng g(11);
  nc::workspace ws;
  for (std::size_t V : {7u, 1000u}) {
    auto row = ref::peaky_row(V, g);
    ref::stage quarter[] = {ref::temperature(0.25)};
    ref::stage two[] = {ref::temperature(0.5), ref::temperature(4.0)};
    CHECK(check_proc(nc::temperature(0.5f) | nc::temperature(0.5f), row, quarter, ws) == "");
    CHECK(check_proc(nc::temperature(0.5f) | nc::temperature(4.0f), row, two, ws) == "");
    // 0.5 then 2 is T = 1: the plain softmax.
    auto a = nucleus_cases::observe((nc::temperature(0.5f) | nc::temperature(2.0f))(row, ws));
    ref::stage none[] = {ref::temperature(1.0)};
    CHECK(ref::check_distribution(row, none, a) == "");
  }
}

TEST_CASE("temperature: hand-computed probabilities", "[stages][temperature]") {
  // logits ln(0.5), ln(0.3), ln(0.2): at T = 2 the weights are their square roots.
  std::vector<float> row = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  nc::workspace ws;
  auto d = nucleus_cases::observe(nc::temperature(2.0f)(row, ws));
  REQUIRE(d.ids.size() == 3);
  const double want[] = {std::sqrt(0.5), std::sqrt(0.3), std::sqrt(0.2)};
  const double sum = want[0] + want[1] + want[2];
  for (std::size_t i = 0; i < 3; ++i) CHECK(d.probs[i] == Approx(want[d.ids[i]] / sum).epsilon(1e-5));
}

TEST_CASE("temperature 0: distribution {argmax: 1} whatever follows", "[stages][temperature]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x7E3C, [&](const nucleus_cases::sweep_row& r) {
    ref::stage chain[] = {ref::temperature(0.0)};
    log.add(with_kind(r.kind, check_proc(nc::temperature(0.0f), r.row, chain, ws)));
    nc::sample_result s = (nc::temperature(0.0f) | nc::categorical())(r.row, ws, nc::draw_key{1, 2});
    if (s.status == nc::status::ok && (s.token != ref::argmax(r.row) || s.logprob != 0.0f))
      log.add(with_kind(r.kind, "T=0 draw " + std::to_string(s.token) + " logprob " +
                                    std::to_string(s.logprob) + ", argmax " +
                                    std::to_string(ref::argmax(r.row))));
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 60);
}

TEST_CASE("temperature: a T whose 1/T overflows float is greedy, like T = 0", "[stages][temperature]") {
  ref::rng g(77);
  for (std::size_t V : {2u, 1000u, 32000u}) {
    const auto row = ref::peaky_row(V, g);
    nc::workspace ws;
    const std::int32_t best = ref::argmax(row);
    for (float t : {1e-39f, 1e-45f}) {
      const auto r = (nc::temperature(t) | nc::top_k(5) | nc::categorical())(row, ws, nc::draw_key{1, 2});
      CHECK(r.status == nc::status::ok);
      CHECK(r.token == best);
      CHECK(r.logprob == 0.0f);
    }
    // Two temperatures whose 1/T product overflows.
    const auto r =
        (nc::temperature(1e-20f) | nc::temperature(1e-20f) | nc::categorical())(row, ws, nc::draw_key{3, 4});
    CHECK(r.token == best);
    // Still finite 1/T: a real draw at a tiny temperature, which is the argmax too, with logprob ~0.
    const auto near = (nc::temperature(1e-30f) | nc::categorical())(row, ws, nc::draw_key{3, 4});
    CHECK(near.token == best);
  }
}
