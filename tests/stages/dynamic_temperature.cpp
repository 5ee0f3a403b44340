// dynamic_temperature(t, range, exponent): the temperature follows the normalized entropy.
#include "stages/new_stage_sweep.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

TEST_CASE("dynamic_temperature: the distribution at the reference temperature",
          "[stages][dynamic_temperature]") {
  for (float range : {0.0f, 0.5f, 1.0f}) {
    for (float exponent : {0.5f, 1.0f, 2.0f}) {
      nucleus_cases::sweep_stage(
          0xD7 + static_cast<std::uint64_t>(range * 10 + exponent), {0.0f, 0.3f, 1.0f, 1.5f}, {0.8f},
          [&](float T, float t, std::span<const float> row, nc::workspace& ws) {
            return (nc::temperature(T) | nc::dynamic_temperature(t, range, exponent))(row, ws);
          },
          [&](const ref::state& s, double t) {
            ref::cut c{s, std::numeric_limits<double>::infinity()};
            if (c.s.st != ref::status::ok || c.s.greedy) return c;
            // The library's rounding of T to float, and its rule that a T whose 1/T overflows float
            // is greedy (docs/semantics.md, temperature).
            // The library's weights are exp(y) in 2^-48 units (docs/semantics.md): when every other
            // candidate weighs less than that, its entropy is exactly 0 and T = max(0, t - range).
            bool only_max = true;
            const double mx = ref::max_logit(s.c);
            std::size_t at_max = 0;
            for (const auto& e : s.c) {
              at_max += e.x == mx;
              only_max = only_max && (e.x == mx || std::exp((e.x - mx) / s.t) < 0x1p-48);
            }
            only_max = only_max && at_max == 1;
            const auto dyn = static_cast<float>(only_max && range > 0.0f && s.c.size() > 1
                                                    ? std::max(0.0, static_cast<double>(t) - range)
                                                    : ref::dynamic_temperature(s, t, range, exponent));
            const float inv = (1.0f / static_cast<float>(s.t)) * (1.0f / dyn);  // the row's 1/T product
            const bool greedy = dyn == 0.0f || !(inv <= std::numeric_limits<float>::max());
            ref::apply_temperature(c.s, greedy ? 0.0 : static_cast<double>(dyn));
            return c;
          },
          "dynamic_temperature");
    }
  }
}

TEST_CASE("dynamic_temperature: hand-computed temperatures", "[stages][dynamic_temperature]") {
  nc::workspace ws;
  std::vector<float> flat(8, 1.0f);  // normalized entropy 1: t + range
  nc::row_state s(std::span<const float>(flat), ws);
  CHECK(nc::dynamic_temperature(1.0f, 0.5f, 1.0f).temperature_for(s) == Approx(1.5f).epsilon(1e-6));
  std::vector<float> sure = {0.0f, -200.0f, -200.0f, -200.0f};  // entropy ~0: max(0, t - range)
  nc::row_state s2(std::span<const float>(sure), ws);
  CHECK(nc::dynamic_temperature(1.0f, 0.5f, 1.0f).temperature_for(s2) == Approx(0.5f).epsilon(1e-6));
  nc::row_state s3(std::span<const float>(sure), ws);
  CHECK(nc::dynamic_temperature(0.5f, 1.0f, 1.0f).temperature_for(s3) < 1e-6f);  // min 0: near greedy
  // range 0 is temperature(t), bit for bit.
  std::vector<float> row = {1.0f, 2.0f, 0.5f, -1.0f};
  const auto a = nucleus_cases::observe(nc::dynamic_temperature(0.7f, 0.0f, 1.0f)(row, ws));
  const auto b = nucleus_cases::observe(nc::temperature(0.7f)(row, ws));
  CHECK(a.ids == b.ids);
  CHECK(a.probs == b.probs);
  CHECK_THROWS_AS(nc::dynamic_temperature(-1.0f, 0.5f, 1.0f), std::invalid_argument);
  CHECK_THROWS_AS(nc::dynamic_temperature(1.0f, 0.5f, -1.0f), std::invalid_argument);
}
