// Printing a distribution the way the lesson draws it: token, probability, bar.
#pragma once

#include <algorithm>
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <nucleus/nucleus.hpp>

namespace nucleus::examples {

inline std::string bar(double p, int width = 40) {
  const int n = static_cast<int>(p * width + 0.5);
  std::string s;
  for (int i = 0; i < n; ++i) s += "\u2588";
  return s;
}

// The n most likely tokens of `logits` at temperature t, each with its probability and a bar.
inline void print_top(std::span<const float> logits, float t, std::size_t n,
                      const std::function<std::string(std::int32_t)>& text, workspace& ws) {
  const distribution full = nucleus::temperature(t)(logits, ws);
  std::vector<std::pair<float, std::int32_t>> rows;
  for (std::size_t i = 0; i < full.size(); ++i) rows.emplace_back(full.probs()[i], full.ids()[i]);
  const std::size_t shown = std::min(n, rows.size());
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(shown), rows.end(),
                    [](const auto& a, const auto& b) {
                      return a.first > b.first || (a.first == b.first && a.second < b.second);
                    });
  std::printf("  T = %.1f\n", static_cast<double>(t));
  for (std::size_t i = 0; i < shown; ++i) {
    const double pi = rows[i].first;
    std::printf("    %-18s %6.2f%%  %s\n", ("'" + text(rows[i].second) + "'").c_str(), 100.0 * pi,
                bar(pi).c_str());
  }
}

// Which tokens a processor keeps, with their renormalized probabilities.
template <class Proc>
void print_kept(const char* label, const Proc& proc, std::span<const float> logits,
                const std::function<std::string(std::int32_t)>& text, workspace& ws) {
  const distribution d = proc(logits, ws);
  std::vector<std::pair<float, std::int32_t>> rows;  // most likely first, whatever d's order
  for (std::size_t i = 0; i < d.size(); ++i) rows.emplace_back(d.probs()[i], d.ids()[i]);
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  std::printf("  %s keeps %zu:", label, d.size());
  for (std::size_t i = 0; i < rows.size() && i < 10; ++i)
    std::printf(" '%s' %.1f%%", text(rows[i].second).c_str(), 100.0 * static_cast<double>(rows[i].first));
  std::printf("%s\n", d.size() > 10 ? " ..." : "");
}

}  // namespace nucleus::examples
