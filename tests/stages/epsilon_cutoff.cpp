// epsilon_cutoff(e): keep p >= e, and always the most likely token.
#include "stages/new_stage_sweep.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

TEST_CASE("epsilon_cutoff: survivors and probabilities match the reference", "[stages][epsilon_cutoff]") {
  nucleus_cases::sweep_stage(
      0xE95, {0.0f, 3e-4f, 1e-3f, 0.01f, 0.1f, 0.5f, 0.9f}, {3e-4f},
      [](float T, float e, std::span<const float> row, nc::workspace& ws) {
        return (nc::temperature(T) | nc::epsilon_cutoff(e))(row, ws);
      },
      [](const ref::state& s, double e) { return ref::epsilon_cutoff(s, e); }, "epsilon_cutoff");
  CHECK_THROWS_AS(nc::epsilon_cutoff(1.0f), std::invalid_argument);
  CHECK_THROWS_AS(nc::epsilon_cutoff(-0.1f), std::invalid_argument);
}
