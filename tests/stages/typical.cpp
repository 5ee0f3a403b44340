// typical(p): keep the tokens whose surprise is nearest the entropy until their mass reaches p.
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
