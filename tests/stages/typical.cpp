// typical(p): keep the tokens whose surprise is nearest the entropy until their mass reaches p.
#include <bit>
#include <limits>
#include <random>

#include "stages/new_stage_sweep.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

TEST_CASE("typical: survivors and probabilities match the reference", "[stages][typical]") {
  nucleus_cases::sweep_stage(
      0x7E1, {0.05f, 0.2f, 0.5f, 0.9f, 0.95f, 0.999f, 1.0f}, {0.9f},
      [](float T, float p, std::span<const float> row, nc::workspace& ws) {
        return (nc::temperature(T) | nc::typical(p))(row, ws);
      },
      [](const ref::state& s, double p) { return ref::typical(s, p); }, "typical");
}

TEST_CASE("typical: hand-computed cut", "[stages][typical]") {
  nc::workspace ws;
  // p = 0.5, 0.25, 0.125, 0.125: H = 1.2130 nats; surprises 0.693, 1.386, 2.079, 2.079. Nearest H:
  // token 1 (0.173), then 0 (0.520), then 2 and 3 (0.866, ties to the lower id).
  std::vector<float> row;
  for (double p : {0.5, 0.25, 0.125, 0.125}) row.push_back(static_cast<float>(std::log(p)));
  auto ids = [&](float p) {
    auto o = nucleus_cases::observe(nc::typical(p)(row, ws));
    std::sort(o.ids.begin(), o.ids.end());
    return o.ids;
  };
  CHECK(ids(0.2f) == std::vector<std::int32_t>{1});
  CHECK(ids(0.25f) == std::vector<std::int32_t>{1});  // the mass before token 0 is 0.25, not < 0.25
  CHECK(ids(0.3f) == std::vector<std::int32_t>{0, 1});
  CHECK(ids(0.8f) == std::vector<std::int32_t>{0, 1, 2});
  CHECK(ids(1.0f) == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK_THROWS_AS(nc::typical(0.0f), std::invalid_argument);
  CHECK_THROWS_AS(nc::typical(1.5f), std::invalid_argument);
}

namespace {

// The row after an optional top_k and a temperature, then the ring (typical_banded, from `start`: an
// estimate for hist_bins, else a ring of one bin there) or the exact histogram; its candidates as
// (id, value) and one draw.
struct outcome {
  std::vector<std::pair<std::int32_t, float>> kept;
  nc::sample_result draw;
  bool banded = true;
};
template <class T>
outcome run_typical(std::span<const T> row, float temp, float p, std::size_t top_k, bool exact,
                    std::uint32_t start, nc::workspace& ws) {
  nc::row_state s(row, ws);
  if (top_k > 0) nc::top_k(static_cast<int>(top_k)).apply(s);
  s.scale_inv_temperature(1.0f / temp);
  const float mx = s.max_logit();
  outcome o;
  if (exact) {
    nucleus::detail::typical_exact(s, p, 1);
  } else {
    o.banded = nucleus::detail::typical_banded(s, p, mx, start);
    if (!o.banded) nucleus::detail::typical_exact(s, p, 1);
  }
  // The draw first: it reads a pending window and the lent weights in place.
  o.draw = nc::draw(s, nc::draw_key{0x7E1, static_cast<std::uint64_t>(top_k) + 3});
  for (std::size_t i = 0; i < s.size(); ++i) o.kept.emplace_back(s.id(i), s.value(i));
  return o;
}

}  // namespace

TEST_CASE("typical: the ring around the estimate keeps what the exact histogram keeps", "[stages][typical]") {
  // Rows of 512 to 20,000 candidates: peaked (a few spikes), flat, ties on a coarse grid, bf16 values,
  // NaN and -inf; after a top_k or not; at three temperatures. The ring's candidates, their order and
  // the draw from its pending window must equal the exact histogram's, bit for bit. A ring started a
  // bin wide at distance 0 or 20 nats must move (or give up to the exact path) and still agree.
  nc::workspace ws;
  std::mt19937_64 rng(0x7E1C);
  std::size_t compared = 0, banded_first = 0, estimated = 0, gave_up = 0;
  for (int it = 0; it < 72; ++it) {
    const std::size_t n = 512 + rng() % 20000;
    const int kind = it % 6;
    std::normal_distribution<float> body(0.0f, kind == 1 ? 0.4f : 2.5f);
    std::vector<float> x(n);
    for (float& v : x) v = body(rng);
    if (kind == 0)
      for (int k = 0; k < 8; ++k) x[rng() % n] = 12.0f + static_cast<float>(rng() % 400) / 100.0f;
    if (kind == 2)
      for (float& v : x) v = std::round(v * 2.0f) / 2.0f + 0.0f;  // + 0.0f: no -0.0 (it ties +0.0)
    if (kind == 3)
      for (std::size_t i = 0; i < n; i += 7)
        x[i] = (i % 2) ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity();
    std::vector<nc::bf16> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = nc::to_bf16(x[i]);
    const std::size_t top_k = kind == 5 ? 600 + rng() % 4000 : 0;
    for (float temp : {1.0f, 0.5f, 2.0f})
      for (float p : {0.05f, 0.5f, 0.9f, 0.999f})
        for (std::uint32_t start : {std::uint32_t{nucleus::detail::hist_bins}, 0u, 640u}) {
          INFO("row " << it << " n " << n << " T " << temp << " p " << p << " start " << start);
          const outcome want = kind == 4 ? run_typical<nc::bf16>(h, temp, p, top_k, true, start, ws)
                                         : run_typical<float>(x, temp, p, top_k, true, start, ws);
          const outcome got = kind == 4 ? run_typical<nc::bf16>(h, temp, p, top_k, false, start, ws)
                                        : run_typical<float>(x, temp, p, top_k, false, start, ws);
          REQUIRE(got.kept == want.kept);
          REQUIRE(got.draw.token == want.draw.token);
          REQUIRE(std::bit_cast<std::uint32_t>(got.draw.logprob) ==
                  std::bit_cast<std::uint32_t>(want.draw.logprob));
          ++compared;
          if (start == nucleus::detail::hist_bins) {
            ++estimated;
            banded_first += got.banded;
          }
          gave_up += !got.banded;
        }
  }
  CHECK(compared == 72 * 3 * 4 * 3);
  CHECK(banded_first * 20 >= estimated * 19);  // the estimate's ring holds the cut, or a move finds it
  CHECK(gave_up > 0);                          // (the far starts reach the exact path)
}
