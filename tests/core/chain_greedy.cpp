// Composition: temperature 0 anywhere in a chain is its argmax.
#include <catch2/catch.hpp>

#include "core/chain_subsets.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::error_log;
using nucleus_cases::observe;
using namespace nucleus_chain_subsets;

namespace {
// What one greedy chain gave (its draw r and its distribution d) against the row's argmax. Not a
// template: the 80 chain types below share it.
std::string check_greedy(std::span<const float> row, const std::vector<ref::stage>& st, const char* where,
                         nc::sample_result r, const nucleus_ref::observed& d) {
  const std::int32_t want = ref::argmax(row);
  const bool ok = r.status == nc::status::ok && r.token == want && r.logprob == 0.0f && d.ids.size() == 1 &&
                  d.ids[0] == want && d.probs[0] == 1.0f;
  if (!ok)
    return ref::describe(st) + " (" + where + "): token " + std::to_string(r.token) + " logprob " +
           std::to_string(r.logprob) + " size " + std::to_string(d.ids.size()) + ", argmax " +
           std::to_string(want);
  return ref::check_distribution(row, st, d);
}
}  // namespace

TEST_CASE("chain: temperature 0 anywhere gives the argmax", "[core][chain]") {
  ref::rng g(0x7E60);
  error_log log;
  nc::workspace ws;
  std::vector<std::vector<float>> rows;
  for (auto kind : ref::candidate_row_kinds) rows.push_back(ref::make_row(kind, 1 + g.below(2000), g));
  params q;
  q.T = 0.0f;
  for_each_subset(q, [&](int code, const auto& proc, const std::vector<ref::stage>& stages) {
    auto check = [&](const auto& p, const std::vector<ref::stage>& st, const char* where) {
      for (auto& row : rows) {
        const nc::sample_result r = (p | nc::categorical())(row, ws, nc::draw_key{3, 4});
        log.add(check_greedy(row, st, where, r, observe(p(row, ws))));
      }
    };
    bool has_temperature = false;
    for (std::size_t i = 0; i < length(code); ++i) has_temperature |= digit(code, i) == 1;
    if (has_temperature) {
      check(proc, stages, "inside");
    } else {
      auto front = stages, back = stages;
      front.insert(front.begin(), ref::temperature(0));
      back.push_back(ref::temperature(0));
      check(nc::temperature(0.0f) | proc, front, "front");
      check(proc | nc::temperature(0.0f), back, "back");
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 600);
}
