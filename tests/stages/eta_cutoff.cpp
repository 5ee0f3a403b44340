// eta_cutoff(eta): keep p >= min(eta, sqrt(eta) exp(-H)), and always the most likely token.
#include "stages/new_stage_sweep.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

TEST_CASE("eta_cutoff: survivors and probabilities match the reference", "[stages][eta_cutoff]") {
  nucleus_cases::sweep_stage(
      0xE7A, {0.0f, 3e-4f, 1e-3f, 0.01f, 0.1f, 0.5f}, {1e-3f},
      [](float T, float e, std::span<const float> row, nc::workspace& ws) {
        return (nc::temperature(T) | nc::eta_cutoff(e))(row, ws);
      },
      [](const ref::state& s, double e) { return ref::eta_cutoff(s, e); }, "eta_cutoff");
  CHECK_THROWS_AS(nc::eta_cutoff(1.0f), std::invalid_argument);
}
