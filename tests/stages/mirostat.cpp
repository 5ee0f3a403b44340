// mirostat 1 and 2: the truncation, the draw over the survivors, and the update of the caller's mu.
#include "stages/new_stage_sweep.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

TEST_CASE("mirostat_v2: truncation matches the reference", "[stages][mirostat]") {
  nucleus_cases::sweep_stage(
      0x312, {0.5f, 1.0f, 3.0f, 6.0f, 10.0f, 20.0f}, {10.0f},
      [](float T, float mu, std::span<const float> row, nc::workspace& ws) {
        nc::row_state s(row, ws);
        nc::temperature(T).apply(s);
        if (s.live() && !s.greedy()) nc::mirostat_v2(5.0f, 0.1f, mu).truncate(s);
        return nc::materialize(s);
      },
      [](const ref::state& s, double mu) { return ref::mirostat_v2(s, mu); }, "mirostat_v2");
}

TEST_CASE("mirostat_v1: it keeps the reference's top k", "[stages][mirostat]") {
  // The k rule itself, where the row length is known.
  nucleus_cases::error_log log;
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x313, [&](const nucleus_cases::sweep_row& r) {
    for (float mu : {1.0f, 4.0f, 8.0f, 12.0f}) {
      ref::state s = ref::candidates(r.row);
      if (s.st != ref::status::ok || s.c.size() < 2) continue;
      const double k = ref::mirostat_k(s, mu, 100, r.V);
      if (std::isfinite(k) && std::fabs(k - std::round(k)) < 1e-6 * std::max(1.0, k)) continue;  // razor
      std::size_t want = !(k < static_cast<double>(s.c.size())) ? s.c.size()
                         : k >= 1.0                             ? static_cast<std::size_t>(k)
                                                                : 1;
      nc::row_state st(std::span<const float>(r.row), ws);
      nc::mirostat(5.0f, 0.1f, mu).truncate(st);
      const auto o = nucleus_cases::observe(nc::materialize(st));
      // k counts candidates (top-k, ties to the lower id); a +inf row keeps its +inf tokens only.
      log.add(o.ids.size() == std::min(want, s.c.size())
                  ? std::string()
                  : std::string(ref::to_string(r.kind)) + " V=" + std::to_string(r.V) +
                        " mu=" + std::to_string(mu) + ": kept " + std::to_string(o.ids.size()) +
                        ", k=" + std::to_string(k));
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked >= 120);
}

TEST_CASE("mirostat: the draw updates the caller's mu by the token's surprise", "[stages][mirostat]") {
  nc::workspace ws;
  std::vector<float> row = {2.0f, 1.5f, 1.0f, 0.0f, -1.0f, -3.0f, 0.7f, 1.2f};
  for (int version : {1, 2}) {
    float mu = nc::mirostat_initial_mu(3.0f);
    CHECK(mu == 6.0f);
    for (std::uint64_t pos = 0; pos < 200; ++pos) {
      const float before = mu;
      nc::row_state probe(std::span<const float>(row), ws);
      if (version == 1) {
        nc::mirostat(3.0f, 0.2f, mu).truncate(probe);
      } else {
        nc::mirostat_v2(3.0f, 0.2f, mu).truncate(probe);
      }
      const auto survivors = nucleus_cases::observe(nc::materialize(probe));
      const nc::sample_result r = version == 1
                                      ? nc::mirostat(3.0f, 0.2f, mu)(row, ws, nc::draw_key{5, pos})
                                      : nc::mirostat_v2(3.0f, 0.2f, mu)(row, ws, nc::draw_key{5, pos});
      REQUIRE(r.status == nc::status::ok);
      const auto it = std::find(survivors.ids.begin(), survivors.ids.end(), r.token);
      REQUIRE(it != survivors.ids.end());
      const double p = survivors.probs[static_cast<std::size_t>(it - survivors.ids.begin())];
      CHECK(mu == Approx(ref::mirostat_update(before, 3.0, 0.2, p)).epsilon(1e-5));
    }
  }
}

TEST_CASE("mirostat_v2 draws by the survivors' probabilities (chi-square)", "[stages][mirostat]") {
  nc::workspace ws;
  std::vector<float> row = {3.0f, 2.6f, 2.5f, 1.0f, 0.2f, -1.0f, 2.55f, -4.0f};
  ref::state s = ref::candidates(row);
  const ref::distribution want = ref::finish(ref::mirostat_v2(s, 4.0).s);
  nucleus_cases::check_draws_follow(want, 40000, [&](std::uint64_t pos) {
    float mu = 4.0f;  // fresh each draw: one fixed distribution
    return nc::mirostat_v2(5.0f, 0.1f, mu)(row, ws, nc::draw_key{11, pos});
  });
}
