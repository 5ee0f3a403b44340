// logprobs_of(row, ids, out): raw log-probabilities of given ids, as evals score a continuation.
#include <catch2/catch.hpp>

#include <nucleus/engine.hpp>
#include <stdexcept>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

TEST_CASE("logprobs_of: equals log_softmax at the given ids, on every row kind", "[ops][logprobs_of]") {
  ref::rng g(0x10F);
  for (std::size_t V : {1u, 7u, 1000u, 151936u}) {
    for (auto kind : ref::all_row_kinds) {
      const auto row = ref::make_row(kind, V, g);
      std::vector<std::int32_t> ids;
      for (std::size_t i = 0; i < 40; ++i) ids.push_back(static_cast<std::int32_t>(g.below(V)));
      ids.push_back(ref::argmax(row) < 0 ? 0 : ref::argmax(row));
      std::vector<float> got(ids.size()), all(V);
      const nc::status st = nc::logprobs_of(row, ids, got);
      CHECK(st == nc::log_softmax(row, all));
      const auto want = ref::log_softmax(row);
      for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto t = static_cast<std::size_t>(ids[i]);
        INFO("V=" << V << " kind " << ref::to_string(kind) << " id " << t << " logit " << row[t]);
        CHECK(ref::float_bits(got[i]) == ref::float_bits(all[t]));  // the same formula as log_softmax
        if (std::isnan(row[t]) || want[t] < -std::numeric_limits<float>::max()) {
          CHECK(got[i] == -ref::inf);
        } else {
          CHECK(std::fabs(got[i] - want[t]) <= ref::logprob_tol(want[t]));
        }
      }
      // bf16 rows: the same as their float conversion.
      std::vector<nc::bf16> b(V);
      std::vector<float> wide(V), gb(ids.size()), gw(ids.size());
      for (std::size_t i = 0; i < V; ++i) wide[i] = nc::to_float(b[i] = nc::to_bf16(row[i]));
      CHECK(nc::logprobs_of(std::span<const nc::bf16>(b), ids, gb) == nc::logprobs_of(wide, ids, gw));
      CHECK(std::memcmp(gb.data(), gw.data(), gb.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("logprobs_of: bad arguments throw", "[ops][logprobs_of]") {
  const std::vector<float> row = {1.0f, 2.0f, 3.0f};
  std::vector<float> out(2);
  const std::vector<std::int32_t> ok = {0, 2}, high = {0, 3}, neg = {-1, 0};
  CHECK_THROWS_AS(nc::logprobs_of(row, high, out), std::invalid_argument);
  CHECK_THROWS_AS(nc::logprobs_of(row, neg, out), std::invalid_argument);
  CHECK_THROWS_AS(nc::logprobs_of(row, ok, std::span<float>(out).first(1)), std::invalid_argument);
  CHECK_THROWS_AS(
      nc::logprobs_of(std::span<const float>{}, std::span<const std::int32_t>{}, std::span<float>{}),
      std::invalid_argument);
  CHECK(nc::logprobs_of(row, ok, out) == nc::status::ok);
  CHECK(out[1] > out[0]);
}
