// A pending window (core/row_state.hpp): flat top-p and XTC leave a dense row whole with a value window
// instead of copying most of it. The draw reads the window in place; every other look at the
// candidates applies it first. Both must give exactly what the copy gives: the same token, the same
// logprob bits, the same candidates for any stage after.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include <nucleus/nucleus.hpp>

namespace nc = nucleus;

namespace {

// Looks at the candidates (size() applies a pending window): the draw after it reads the copy.
struct settle_stage : nc::stage<settle_stage> {
  static constexpr nc::stage_info info{};
  void apply(nc::row_state& s) const { (void)s.size(); }
};

// v as T; the rows hold multiples of 1/64 below 16 in magnitude, exact in every type (f16 by its bits).
template <class T>
T as(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else if constexpr (std::is_same_v<T, nc::bf16>) {
    return nc::to_bf16(v);
  } else {
    const std::uint16_t sign = std::signbit(v) ? 0x8000 : 0;
    if (std::isnan(v)) return nc::f16{0x7e00};
    if (std::isinf(v)) return nc::f16{static_cast<std::uint16_t>(sign | 0x7c00)};
    if (v == 0.0f) return nc::f16{sign};
    const auto b = std::bit_cast<std::uint32_t>(v);
    const auto e = static_cast<std::uint16_t>(((b >> 23) & 0xFF) - 127 + 15);
    return nc::f16{static_cast<std::uint16_t>(sign | e << 10 | ((b >> 13) & 0x3FF))};
  }
}

// A flat row: N(0, sigma) logits, a few spikes above, one -inf and one NaN.
template <class T>
std::vector<T> flat_row(std::size_t V, std::mt19937_64& g) {
  std::normal_distribution<float> body(0.0f, std::uniform_real_distribution<float>(0.5f, 2.5f)(g));
  auto q = [](float v) { return std::clamp(std::round(v * 64.0f) / 64.0f, -15.0f, 15.0f); };
  std::vector<T> row(V);
  for (auto& x : row) x = as<T>(q(body(g)));
  std::uniform_int_distribution<std::size_t> at(0, V - 1);
  for (int i = 0; i < 6; ++i) row[at(g)] = as<T>(q(std::uniform_real_distribution<float>(3.0f, 9.0f)(g)));
  row[at(g)] = as<T>(-std::numeric_limits<float>::infinity());
  row[at(g)] = as<T>(std::numeric_limits<float>::quiet_NaN());
  return row;
}

template <class T, class Stage>
int leaves_window(const std::vector<T>& row, const Stage& stage, float T_, nc::draw_key key) {
  nc::workspace ws;
  nc::row_state s(std::span<const T>(row), ws);
  nc::temperature(T_).apply(s);
  if constexpr (Stage::info.needs_key) {
    stage.apply(s, key);
  } else {
    stage.apply(s);
  }
  return s.window_pending() ? (s.lent_exps() ? 2 : 1) : 0;
}

struct tally {
  int windows = 0, lent = 0, draws = 0, mismatches = 0;
};

template <class T>
void compare(tally& t, const std::vector<T>& row, float temp, const auto& stage, const auto& after) {
  nc::workspace ws_a, ws_b;
  for (std::uint64_t pos = 0; pos < 8; ++pos) {
    const nc::draw_key key{0x3A1D0, pos};
    if (pos == 0) {
      const int w = leaves_window(row, stage, temp, key);
      t.windows += w > 0;
      t.lent += w == 2;  // with the stage's stored exp values lent to the draw
    }
    auto in_place = nc::temperature(temp) | stage | after | nc::categorical();
    auto copied = nc::temperature(temp) | stage | settle_stage{} | after | nc::categorical();
    const nc::sample_result a = in_place(std::span<const T>(row), ws_a, key);
    const nc::sample_result b = copied(std::span<const T>(row), ws_b, key);
    ++t.draws;
    if (a.token != b.token ||
        std::bit_cast<std::uint32_t>(a.logprob) != std::bit_cast<std::uint32_t>(b.logprob) ||
        a.status != b.status)
      ++t.mismatches;
  }
}

// A stage that changes nothing: the draw reads the window straight after the stage that left it.
struct nothing_stage : nc::stage<nothing_stage> {
  static constexpr nc::stage_info info{};
  void apply(nc::row_state&) const {}
};

template <class T>
tally run(std::uint64_t seed) {
  std::mt19937_64 g(seed);
  tally t;
  for (std::size_t V : {5000u, 32000u}) {
    for (int rep = 0; rep < 3; ++rep) {
      const std::vector<T> row = flat_row<T>(V, g);
      for (float temp : {1.0f, 2.0f, 4.0f}) {
        for (float p : {0.5f, 0.9f, 0.99f}) {
          compare(t, row, temp, nc::top_p(p), nothing_stage{});
          compare(t, row, temp, nc::top_p(p), nc::min_p(0.02f));  // a stage after the window applies it
          compare(t, row, temp, nc::top_p(p), nc::top_k(50));
        }
        for (float threshold : {0.001f, 0.01f, 0.1f}) {
          compare(t, row, temp, nc::xtc(1.0f, threshold), nothing_stage{});
          compare(t, row, temp, nc::xtc(1.0f, threshold), nc::top_p(0.9f));  // a window after a window
        }
      }
    }
  }
  return t;
}

}  // namespace

TEST_CASE("a pending window draws what the copy draws: float rows", "[core][window]") {
  const tally t = run<float>(0x517D);
  INFO("windows left " << t.windows << " (" << t.lent << " lending exps), draws " << t.draws
                       << ", mismatches " << t.mismatches);
  CHECK(t.mismatches == 0);
  CHECK(t.draws == 2 * 3 * 3 * (9 + 6) * 8);
  CHECK(t.lent >= 10);
  CHECK(t.windows >= 40);  // the window path is taken, not only the copy (42 to 52 when written)
}

TEST_CASE("a pending window draws what the copy draws: bf16 and f16 rows", "[core][window]") {
  for (const tally& t : {run<nc::bf16>(0x517E), run<nc::f16>(0x517F)}) {
    INFO("windows left " << t.windows << " (" << t.lent << " lending exps), draws " << t.draws
                         << ", mismatches " << t.mismatches);
    CHECK(t.mismatches == 0);
    CHECK(t.windows >= 40);
    CHECK(t.lent >= 10);
  }
}

TEST_CASE("a pending window: the candidates any other look sees", "[core][window]") {
  // Two values far above the rest (probabilities 0.71 and 0.26): XTC(1, 0.2) removes the top one,
  // leaving a window [-max, 1.0].
  std::vector<float> row(1000, -10.0f);
  row[10] = 2.0f;
  row[20] = 1.0f;
  row[30] = -std::numeric_limits<float>::infinity();
  nc::workspace ws;
  nc::row_state s(std::span<const float>(row), ws);
  nc::xtc(1.0f, 0.2f).apply(s, nc::draw_key{1, 0});
  REQUIRE(s.window_pending());
  CHECK(s.max_logit() == 1.0f);  // known from XTC: no copy needed for it
  CHECK(s.window_pending());
  CHECK(s.size() == 998);  // all but the top token and -inf; the look applies the window
  CHECK_FALSE(s.window_pending());
  CHECK_FALSE(s.dense());
  CHECK(s.id(0) == 0);
  CHECK(s.id(9) == 9);
  CHECK(s.id(10) == 11);       // 10 removed
  CHECK(s.value(19) == 1.0f);  // id 20 at index 19
  CHECK(s.id(29) == 31);       // 30 (-inf) never a candidate
}
