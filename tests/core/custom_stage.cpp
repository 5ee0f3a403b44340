// The stage from docs/design.md, compiled and tested: user stages compose like built-in ones.
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include <nucleus/nucleus.hpp>

namespace {
struct ban_range_stage : nucleus::stage<ban_range_stage> {
  static constexpr nucleus::stage_info info{};  // a cut: nothing to declare
  std::int32_t first, last;                     // inclusive
  void apply(nucleus::row_state& s) const {
    s.keep_if([&](float, std::int32_t id) { return id < first || id > last; });
  }
};
inline ban_range_stage ban_range(std::int32_t first, std::int32_t last) {
  if (first > last) throw std::invalid_argument("ban_range: first > last");
  return {{}, first, last};
}
}  // namespace

TEST_CASE("a user-written stage composes with the built-in ones") {
  std::vector<float> logits(100);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(i % 17);
  nucleus::workspace ws;
  const auto greedy = ban_range(0, 50) | nucleus::argmax();
  CHECK(greedy(logits, ws).token == 67);  // 67 % 17 == 16: the first maximum above 50
  const auto proc = nucleus::top_k(5) | ban_range(0, 98);
  const nucleus::distribution d = proc(logits, ws);
  REQUIRE(d.size() == 0);  // the five best (ids 16, 33, 50, 67, 84) are all banned
  CHECK(d.status() == nucleus::status::no_candidates);
  const auto chain = ban_range(10, 99) | nucleus::temperature(0.5f) | nucleus::categorical();
  for (std::uint64_t pos = 0; pos < 50; ++pos) {
    const auto r = chain(logits, ws, {7, pos});
    REQUIRE(r.status == nucleus::status::ok);
    CHECK(r.token < 10);
  }
  CHECK_THROWS_AS(ban_range(5, 1), std::invalid_argument);
}
