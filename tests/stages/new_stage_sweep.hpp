// The sweep every stage of tests/reference/samplers.hpp runs: each vocabulary and row kind of
// for_each_sweep_row, at temperatures 1, 0.5 and 2 placed before the stage, against the reference cut.
#pragma once

#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "reference/cases.hpp"
#include "reference/samplers.hpp"

namespace nucleus_cases {

// lib(T, param) runs the library's temperature(T) | stage(param) on a row; want(state, param) is the
// reference cut of a state already at temperature T.
template <class Lib, class Want>
void sweep_stage(std::uint64_t seed, const std::vector<float>& params, const std::vector<float>& big_params,
                 Lib&& lib, Want&& want, const char* name) {
  error_log log;
  int ambiguous = 0;
  nucleus::workspace ws;
  for_each_sweep_row(seed, [&](const sweep_row& r) {
    for (float T : {1.0f, 0.5f, 2.0f}) {
      if (r.big && T != 1.0f) continue;
      for (float p : r.big ? big_params : params) {
        nucleus_ref::state s = nucleus_ref::candidates(r.row);
        nucleus_ref::apply_temperature(s, T);
        const nucleus_ref::cut c = want(s, static_cast<double>(p));
        const nucleus_ref::observed o = observe(lib(T, p, std::span<const float>(r.row), ws));
        const std::string what = std::string(name) + "(" + std::to_string(p) + ") T=" + std::to_string(T) +
                                 " V=" + std::to_string(r.V);
        log.add(with_kind(r.kind, nucleus_ref::check_cut(o, c, what, &ambiguous)));
      }
    }
  });
  INFO(log.summary());
  CHECK(log.count == 0);
  CHECK(log.checked > 100);
  CHECK(ambiguous * 50 <= static_cast<int>(log.checked));  // razor-close cuts stay rare
}

// draw(position) -> sample_result, n times: its tokens must be survivors of `want` and pass a
// chi-square test against want's probabilities.
template <class Draw>
void check_draws_follow(const nucleus_ref::distribution& want, std::uint64_t n, Draw&& draw) {
  std::vector<std::uint64_t> counts(want.entries.size(), 0);
  for (std::uint64_t pos = 0; pos < n; ++pos) {
    const nucleus::sample_result r = draw(pos);
    const auto* e = want.find(r.token);
    REQUIRE(e != nullptr);
    ++counts[static_cast<std::size_t>(e - want.entries.data())];
  }
  std::vector<double> probs;
  for (const auto& e : want.entries) probs.push_back(e.prob);
  const auto chi = nucleus_ref::chi_square(counts, probs);
  INFO("chi2 " << chi.statistic << " df " << chi.df << " critical " << chi.critical);
  CHECK(chi.pass());
}

}  // namespace nucleus_cases
