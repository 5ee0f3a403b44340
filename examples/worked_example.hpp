// The lesson's worked example: the next-token scores after "Kubernetes pods are scheduled by the".
// Logits are ln(p) of a T = 1 distribution: " kube" 48%, " scheduler" 23%, " K8s" 15%, and the
// remaining 14% on five tokens at 2.8% each.
#pragma once

#include <array>
#include <cmath>
#include <string_view>

namespace nucleus::examples {

inline constexpr std::array<std::string_view, 8> worked_tokens = {
    " kube", " scheduler", " K8s", " control", " default", " cluster", " node", " API"};
inline constexpr std::array<double, 8> worked_probs = {0.48, 0.23, 0.15, 0.028, 0.028, 0.028, 0.028, 0.028};

inline std::array<float, 8> worked_logits() {
  std::array<float, 8> l{};
  for (std::size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>(std::log(worked_probs[i]));
  return l;
}

}  // namespace nucleus::examples
