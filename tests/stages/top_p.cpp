// top_p(p): in (logit desc, id asc) order, a token is kept iff the probability before it is < p,
// with probabilities of the current candidates at the current temperature.
#include <catch2/catch.hpp>

#include <algorithm>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::check_proc;
using nucleus_cases::error_log;
using nucleus_cases::log_row;
using nucleus_cases::observe;
using nucleus_cases::sorted_ids;
using nucleus_cases::with_kind;

TEST_CASE("top_p: survivors and probabilities match the reference", "[stages][top_p]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x70B9, [&](const nucleus_cases::sweep_row& r) {
    std::vector<float> ps =
        r.big ? std::vector<float>{0.9f} : std::vector<float>{1e-6f, 0.1f, 0.5f, 0.9f, 0.95f, 1.0f};
    for (float p : ps) {
      ref::stage chain[] = {ref::top_p(p)};
      log.add(with_kind(r.kind, check_proc(nc::top_p(p), r.row, chain, ws)));
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked > 50);
}

TEST_CASE("top_p: the cut uses the probabilities at the current temperature", "[stages][top_p]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x70BA, [&](const nucleus_cases::sweep_row& r) {
    if (r.big) return;
    for (float T : {0.5f, 2.0f}) {
      for (float p : {0.3f, 0.9f}) {
        ref::stage before[] = {ref::temperature(T), ref::top_p(p)};
        log.add(with_kind(r.kind, check_proc(nc::temperature(T) | nc::top_p(p), r.row, before, ws)));
        ref::stage after[] = {ref::top_p(p), ref::temperature(T)};
        log.add(with_kind(r.kind, check_proc(nc::top_p(p) | nc::temperature(T), r.row, after, ws)));
      }
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 400);
}

TEST_CASE("top_p: hand-computed cuts", "[stages][top_p]") {
  nc::workspace ws;
  // probabilities 0.5, 0.2, 0.3 (ids 0, 1, 2): rank order 0, 2, 1; before-masses 0, 0.5, 0.8.
  auto row = log_row({0.5, 0.2, 0.3});
  CHECK(sorted_ids(observe(nc::top_p(0.4f)(row, ws))) == std::vector<std::int32_t>{0});
  CHECK(sorted_ids(observe(nc::top_p(0.6f)(row, ws))) == std::vector<std::int32_t>{0, 2});
  CHECK(sorted_ids(observe(nc::top_p(0.85f)(row, ws))) == std::vector<std::int32_t>{0, 1, 2});
  CHECK(sorted_ids(observe(nc::top_p(1.0f)(row, ws))) == std::vector<std::int32_t>{0, 1, 2});
  // The top token survives even the smallest p.
  CHECK(sorted_ids(observe(nc::top_p(1e-30f)(row, ws))) == std::vector<std::int32_t>{0});
  // Renormalized over the survivors: 0.5 / 0.8 and 0.3 / 0.8.
  auto o = observe(nc::top_p(0.6f)(row, ws));
  for (std::size_t i = 0; i < o.ids.size(); ++i)
    CHECK(o.probs[i] == Approx(o.ids[i] == 0 ? 0.625 : 0.375).epsilon(1e-5));

  // Temperature before: at T = 4 the probabilities flatten to 0.374, 0.297, 0.329 (before-masses 0, 0.374,
  // 0.703), so top_p(0.75) keeps all three; placed after the cut, temperature only reshapes the two.
  CHECK(sorted_ids(observe((nc::temperature(4.0f) | nc::top_p(0.75f))(row, ws))) ==
        std::vector<std::int32_t>{0, 1, 2});
  CHECK(sorted_ids(observe((nc::top_p(0.75f) | nc::temperature(4.0f))(row, ws))) ==
        std::vector<std::int32_t>{0, 2});
}

TEST_CASE("top_p: equal logits are cut in id order", "[stages][top_p]") {
  nc::workspace ws;
  std::vector<float> row(10, -2.0f);  // 0.1 each: before-masses 0, 0.1, 0.2, 0.3, ...
  CHECK(sorted_ids(observe(nc::top_p(0.25f)(row, ws))) == std::vector<std::int32_t>{0, 1, 2});
  CHECK(sorted_ids(observe(nc::top_p(0.05f)(row, ws))) == std::vector<std::int32_t>{0});
  std::vector<float> inf_row = {1.0f, ref::inf, ref::inf, 7.0f, ref::inf, ref::inf};  // four at 0.25
  CHECK(sorted_ids(observe(nc::top_p(0.6f)(inf_row, ws))) == std::vector<std::int32_t>{1, 2, 4});
}

TEST_CASE("top_p after a cut renormalizes over the current candidates", "[stages][top_p]") {
  nc::workspace ws;
  // 0.4, 0.3, 0.2, 0.1: top_k(2) leaves 0.571 and 0.429, so the second survives top_p(0.58) only.
  auto row = log_row({0.4, 0.3, 0.2, 0.1});
  CHECK(sorted_ids(observe(nc::top_p(0.5f)(row, ws))) == std::vector<std::int32_t>{0, 1});
  CHECK(sorted_ids(observe((nc::top_k(2) | nc::top_p(0.58f))(row, ws))) == std::vector<std::int32_t>{0, 1});
  CHECK(sorted_ids(observe((nc::top_k(2) | nc::top_p(0.56f))(row, ws))) == std::vector<std::int32_t>{0});
}
