// top_logprobs(logits, n, ws): the n most likely tokens at T = 1, descending, ties to the lower id.
#include <catch2/catch.hpp>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::error_log;
using nucleus_cases::with_kind;

namespace {

std::string compare(std::span<const float> row, std::size_t n, std::span<const nc::token_logprob> got) {
  auto want = ref::top_logprobs(row, n);
  std::ostringstream os;
  os.precision(10);
  os << "V=" << row.size() << " n=" << n << ": ";
  if (got.size() != want.size()) {
    os << got.size() << " entries, reference " << want.size();
    return os.str();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i].token != want[i].token) {
      os << "rank " << i << " token " << got[i].token << ", reference " << want[i].token;
      return os.str();
    }
    bool ok = std::fabs(got[i].logprob - want[i].logprob) <= ref::logprob_tol(want[i].logprob);
    if (want[i].logprob < -std::numeric_limits<float>::max())
      ok = got[i].logprob == -ref::inf;  // beyond float
    if (!ok) {
      os << "rank " << i << " logprob " << got[i].logprob << ", reference " << want[i].logprob;
      return os.str();
    }
  }
  return {};
}

}  // namespace

TEST_CASE("top_logprobs: matches the reference on every row kind", "[ops][top_logprobs]") {
  error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x7095, [&](const nucleus_cases::sweep_row& r) {
    for (std::size_t n : {1u, 8u, 20u, 100u})
      log.add(with_kind(r.kind, compare(r.row, n, nc::top_logprobs(r.row, n, ws))));
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 250);
}

TEST_CASE("top_logprobs: ties go to the lower id; n beyond the candidates", "[ops][top_logprobs]") {
  nc::workspace ws;
  std::vector<float> row = {1.0f, 4.0f, ref::nan, 4.0f, -ref::inf, 2.0f, 4.0f};
  auto top = nc::top_logprobs(row, 2, ws);
  REQUIRE(top.size() == 2);
  CHECK(top[0].token == 1);
  CHECK(top[1].token == 3);
  CHECK(top[0].logprob == top[1].logprob);
  auto all = nc::top_logprobs(row, 10, ws);
  REQUIRE(all.size() == 5);  // NaN and -inf are not candidates
  const std::int32_t order[] = {1, 3, 6, 5, 0};
  for (std::size_t i = 0; i < 5; ++i) CHECK(all[i].token == order[i]);
  CHECK(nc::top_logprobs(row, 0, ws).empty());
}

TEST_CASE("top_logprobs: raw logprobs agree with log_softmax", "[ops][top_logprobs]") {
  ref::rng g(8);
  nc::workspace ws;
  for (std::size_t V : {9u, 1000u, 32000u}) {
    auto row = ref::peaky_row(V, g);
    std::vector<float> out(V);
    REQUIRE(nc::log_softmax(row, out) == nc::status::ok);
    auto top = nc::top_logprobs(row, 8, ws);
    REQUIRE(top.size() == 8);
    for (std::size_t i = 0; i < top.size(); ++i) {
      CHECK(top[i].logprob == Approx(out[static_cast<std::size_t>(top[i].token)]).margin(2e-5));
      if (i) CHECK(top[i - 1].logprob >= top[i].logprob);
    }
  }
}

TEST_CASE("top_logprobs: rows without candidates give nothing", "[ops][top_logprobs]") {
  nc::workspace ws;
  std::vector<float> row = {ref::nan, -ref::inf};
  CHECK(nc::top_logprobs(row, 4, ws).empty());
  CHECK(nc::top_logprobs(std::span<const float>(), 4, ws).empty());
}
