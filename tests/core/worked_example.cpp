// The worked example: " kube", " scheduler", " K8s" at 48% / 23% / 15% (T = 1), 14% on five others.
#include <catch2/catch.hpp>

#include <cmath>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

namespace {

// Ids are scattered on purpose: the three named tokens are not the first three.
constexpr std::int32_t kube = 5, scheduler = 2, k8s = 7;

std::vector<float> example_row() {
  std::vector<float> row(8, static_cast<float>(std::log(0.028)));
  row[kube] = static_cast<float>(std::log(0.48));
  row[scheduler] = static_cast<float>(std::log(0.23));
  row[k8s] = static_cast<float>(std::log(0.15));
  return row;
}

double prob_of(const nc::distribution& d, std::int32_t id) {
  for (std::size_t i = 0; i < d.size(); ++i)
    if (d.ids()[i] == id) return d.probs()[i];
  return 0.0;
}

}  // namespace

TEST_CASE("worked example: T = 1 gives back the stated probabilities", "[core][example]") {
  auto row = example_row();
  nc::workspace ws;
  auto d = nc::temperature(1.0f)(row, ws);
  CHECK(prob_of(d, kube) == Approx(0.48).margin(0.01));
  CHECK(prob_of(d, scheduler) == Approx(0.23).margin(0.01));
  CHECK(prob_of(d, k8s) == Approx(0.15).margin(0.01));
  for (std::int32_t other : {0, 1, 3, 4, 6}) CHECK(prob_of(d, other) == Approx(0.028).margin(0.01));
}

TEST_CASE("worked example: T = 0.1 puts ~100% on kube", "[core][example]") {
  auto row = example_row();
  nc::workspace ws;
  CHECK(prob_of(nc::temperature(0.1f)(row, ws), kube) == Approx(1.0).margin(0.01));
  for (std::uint64_t pos = 0; pos < 50; ++pos)
    CHECK((nc::temperature(0.1f) | nc::categorical())(row, ws, nc::draw_key{2024, pos}).token == kube);
}

TEST_CASE("worked example: T = 2 flattens to about 29% / 20% / 16%", "[core][example]") {
  auto row = example_row();
  nc::workspace ws;
  auto d = nc::temperature(2.0f)(row, ws);
  CHECK(prob_of(d, kube) == Approx(0.29).margin(0.01));
  CHECK(prob_of(d, scheduler) == Approx(0.20).margin(0.01));
  CHECK(prob_of(d, k8s) == Approx(0.16).margin(0.01));
  ref::stage chain[] = {ref::temperature(2.0)};
  CHECK(ref::check_distribution(row, chain, nucleus_cases::observe(nc::temperature(2.0f)(row, ws))) == "");
}

TEST_CASE("worked example: greedy returns kube", "[core][example]") {
  auto row = example_row();
  nc::workspace ws;
  nc::sample_result g = nc::argmax()(row, ws);
  CHECK(g.token == kube);
  CHECK(g.logprob == 0.0f);
  nc::sample_result t0 = (nc::temperature(0.0f) | nc::categorical())(row, ws, nc::draw_key{1, 1});
  CHECK(t0.token == kube);
  CHECK(t0.logprob == 0.0f);
}
