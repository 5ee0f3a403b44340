// xtc(probability, threshold): with chance `probability`, drop every token with p >= threshold but the
// least likely of them. The coin is the draw key's xtc stream.
#include "stages/new_stage_sweep.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

TEST_CASE("xtc: survivors and probabilities match the reference (probability 1)", "[stages][xtc]") {
  nucleus_cases::sweep_stage(
      0x87C, {0.0f, 0.01f, 0.05f, 0.1f, 0.3f, 0.5f, 0.6f}, {0.05f},
      [](float T, float t, std::span<const float> row, nc::workspace& ws) {
        return (nc::temperature(T) | nc::xtc(1.0f, t))(row, ws, nc::draw_key{1, 2});
      },
      [](const ref::state& s, double t) { return ref::xtc(s, 1.0, t, 0.0); }, "xtc");
}

TEST_CASE("xtc: the coin comes from the key, at the requested rate", "[stages][xtc]") {
  nc::workspace ws;
  std::vector<float> row = {5.0f, 4.9f, 4.8f, 1.0f, 0.5f};  // three tokens above 0.1
  const auto x = nc::xtc(0.3f, 0.1f);
  std::size_t applied = 0;
  const std::size_t n = 20000;
  for (std::uint64_t pos = 0; pos < n; ++pos) {
    const nc::draw_key key{42, pos};
    const auto o = nucleus_cases::observe(x(row, ws, key));
    const bool cut = o.ids.size() == 3;
    const double u = nc::detail::uniform(key, nc::detail::key_stream::xtc);
    CHECK(cut == (u < 0.3));
    applied += cut ? 1 : 0;
    if (cut) CHECK(std::find(o.ids.begin(), o.ids.end(), 2) != o.ids.end());  // the least likely above stays
  }
  // Binomial(20000, 0.3): sd 65; 6 sd.
  CHECK(std::fabs(static_cast<double>(applied) - 0.3 * n) < 6 * 65.0);
  // The coin and the draw are different streams of one key.
  std::size_t same = 0;
  for (std::uint64_t pos = 0; pos < 1000; ++pos) {
    const nc::draw_key key{7, pos};
    same += (nc::detail::uniform(key) < 0.5) == (nc::detail::uniform(key, nc::detail::key_stream::xtc) < 0.5);
  }
  CHECK(same > 400);
  CHECK(same < 600);
  CHECK_THROWS_AS(nc::xtc(1.5f, 0.1f), std::invalid_argument);
  CHECK_THROWS_AS(nc::xtc(0.5f, -0.1f), std::invalid_argument);
}

TEST_CASE("xtc | categorical draws by the survivors' probabilities (chi-square)", "[stages][xtc]") {
  nc::workspace ws;
  std::vector<float> row = {3.0f, 2.6f, 2.5f, 1.0f, 0.2f, -1.0f, 2.55f};
  const auto chain = nc::xtc(1.0f, 0.1f) | nc::categorical();
  ref::state s = ref::candidates(row);
  const ref::cut c = ref::xtc(s, 1.0, 0.1, 0.0);
  const ref::distribution want = ref::finish(c.s);
  nucleus_cases::check_draws_follow(want, 40000, [&](std::uint64_t pos) {
    return chain(row, ws, nc::draw_key{9, pos});
  });
}
