// Composition: every ordered subset of the stages, in every order, against the reference.
#include <catch2/catch.hpp>

#include "core/chain_subsets.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using nucleus_cases::error_log;
using nucleus_cases::terminal;
using namespace nucleus_chain_subsets;

TEST_CASE("chain: every ordered subset of the stages matches the reference", "[core][chain]") {
  ref::rng g(0xC4A1);
  error_log log;
  nc::workspace ws;
  std::vector<std::vector<float>> rows;
  for (std::size_t V : {1u, 2u, 9u, 300u, 1000u}) {
    rows.push_back(ref::peaky_row(V, g));
    rows.push_back(ref::uniform_row(V, g));
    rows.push_back(ref::make_row(ref::row_kind::pos_inf, V, g));
    rows.push_back(ref::make_row(ref::row_kind::nan, V, g));
  }
  for (params q : {params{}, params{2.0f, 3, 0.5f, 0.2f}, params{0.3f, 1000, 0.99f, 0.001f}}) {
    for_each_subset(q, [&](int, const auto& proc, const std::vector<ref::stage>& stages) {
      for (auto& row : rows) {
        for (std::uint64_t pos = 0; pos < 3; ++pos) {
          log.add(nucleus_cases::check_case(proc, proc | nc::categorical(), terminal::categorical, row,
                                            stages, ws, nc::draw_key{17, pos}));
        }
        log.add(nucleus_cases::check_case(proc, proc | nc::argmax(), terminal::argmax, row, stages, ws,
                                          nc::draw_key{}));
      }
    });
  }
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked == 3 * 64 * rows.size() * 4);
}
