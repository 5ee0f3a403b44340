// min_p(m): keep p_i >= m * p_max, i.e. (x_i - x_max) / T >= ln(m), at the current temperature.
#include <catch2/catch.hpp>

#include <algorithm>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::check_proc;
using nucleus_cases::error_log;
using nucleus_cases::observe;
using nucleus_cases::sorted_ids;
using nucleus_cases::with_kind;

TEST_CASE("min_p: survivors and probabilities match the reference", "[stages][min_p]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x3199, [&](const nucleus_cases::sweep_row& r) {
    std::vector<float> ms =
        r.big ? std::vector<float>{0.05f} : std::vector<float>{0.0f, 1e-4f, 0.05f, 0.1f, 0.5f, 1.0f};
    for (float m : ms) {
      ref::stage chain[] = {ref::min_p(m)};
      log.add(with_kind(r.kind, check_proc(nc::min_p(m), r.row, chain, ws)));
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked > 50);
}

TEST_CASE("min_p: the threshold uses the current temperature", "[stages][min_p]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x319A, [&](const nucleus_cases::sweep_row& r) {
    if (r.big) return;
    for (float T : {0.5f, 2.0f}) {
      for (float m : {0.02f, 0.3f}) {
        ref::stage before[] = {ref::temperature(T), ref::min_p(m)};
        log.add(with_kind(r.kind, check_proc(nc::temperature(T) | nc::min_p(m), r.row, before, ws)));
        ref::stage after[] = {ref::min_p(m), ref::temperature(T)};
        log.add(with_kind(r.kind, check_proc(nc::min_p(m) | nc::temperature(T), r.row, after, ws)));
      }
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 400);
}

TEST_CASE("min_p: hand-computed thresholds", "[stages][min_p]") {
  nc::workspace ws;
  // probabilities 0.5, 0.3, 0.04, 0.16: ratios to the max 1, 0.6, 0.08, 0.32.
  std::vector<float> row;
  for (double p : {0.5, 0.3, 0.04, 0.16}) row.push_back(static_cast<float>(std::log(p)));
  CHECK(sorted_ids(observe(nc::min_p(0.1f)(row, ws))) == std::vector<std::int32_t>{0, 1, 3});
  CHECK(sorted_ids(observe(nc::min_p(0.5f)(row, ws))) == std::vector<std::int32_t>{0, 1});
  CHECK(sorted_ids(observe(nc::min_p(1.0f)(row, ws))) == std::vector<std::int32_t>{0});
  CHECK(sorted_ids(observe(nc::min_p(0.0f)(row, ws))) == std::vector<std::int32_t>{0, 1, 2, 3});
  // At T = 2 the ratios are square roots (0.283 for the 0.08 one): min_p(0.1) keeps all.
  CHECK(sorted_ids(observe((nc::temperature(2.0f) | nc::min_p(0.1f))(row, ws))) ==
        std::vector<std::int32_t>{0, 1, 2, 3});
  // Placed after, the temperature does not move the threshold.
  CHECK(sorted_ids(observe((nc::min_p(0.1f) | nc::temperature(2.0f))(row, ws))) ==
        std::vector<std::int32_t>{0, 1, 3});
  // At T = 0.5 the ratios square (0.36 for 0.6): min_p(0.5) keeps only the max.
  CHECK(sorted_ids(observe((nc::temperature(0.5f) | nc::min_p(0.5f))(row, ws))) ==
        std::vector<std::int32_t>{0});
}

TEST_CASE("min_p(1) keeps exactly the tokens tied at the max", "[stages][min_p]") {
  nc::workspace ws;
  std::vector<float> row = {2.0f, 9.0f, 9.0f, ref::nan, 8.999f, 9.0f, -ref::inf};
  auto o = observe(nc::min_p(1.0f)(row, ws));
  CHECK(sorted_ids(o) == std::vector<std::int32_t>{1, 2, 5});
  for (float p : o.probs) CHECK(p == Approx(1.0 / 3).epsilon(1e-6));
}

TEST_CASE("min_p keeps tokens whose probability underflows only when m = 0", "[stages][min_p]") {
  nc::workspace ws;
  std::vector<float> row = {0.0f, -200.0f, -5000.0f, 1.0f};
  CHECK(observe(nc::min_p(0.0f)(row, ws)).ids.size() == 4);
  CHECK(sorted_ids(observe(nc::min_p(1e-30f)(row, ws))) == std::vector<std::int32_t>{0, 3});
}
