// The double-precision reference for the samplers beyond temperature / top-k / top-p / min-p, written
// from their definitions (docs/semantics.md, the papers, the engines' documentation), never from the
// kernels: sort, loop, exp and log in double. Each cut reports its margin, the closest any deciding
// quantity came to its threshold, so tests can tell a razor-close decision from a wrong one.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <vector>

#include "reference/reference.hpp"

namespace nucleus_ref {

struct cut {
  state s;                                                  // the survivors (ascending id) and temperature
  double margin = std::numeric_limits<double>::infinity();  // relative distance to the nearest boundary
};

// Probabilities of the candidates, in their order, at temperature s.t.
inline std::vector<double> probabilities(const state& s) {
  auto w = weights(s.c, s.t);
  const double z = std::accumulate(w.begin(), w.end(), 0.0);
  for (auto& x : w) x /= z;
  return w;
}

inline double entropy(const std::vector<double>& p) {
  double h = 0.0;
  for (double q : p)
    if (q > 0.0) h -= q * std::log(q);
  return h;
}

inline void note(cut& c, double value, double threshold) {
  const double scale = std::max(std::fabs(threshold), 1e-300);
  c.margin = std::min(c.margin, std::fabs(value - threshold) / scale);
}

// Keeps candidates where keep[i] (in s.c's order).
inline void keep_where(state& s, const std::vector<bool>& keep) {
  std::vector<candidate> out;
  for (std::size_t i = 0; i < s.c.size(); ++i)
    if (keep[i]) out.push_back(s.c[i]);
  s.c = std::move(out);
}

// typical(p): order by |-log p_i - H| ascending (ties: higher logit, then lower id); keep while the
// mass before a token is < p, and at least the first min_keep in that order.
inline cut typical(state s, double p, std::size_t min_keep = 1) {
  cut r;
  if (s.st != status::ok || s.greedy || p >= 1.0 || s.c.size() < 2) return {s, r.margin};
  const auto prob = probabilities(s);
  const double h = entropy(prob);
  std::vector<std::size_t> order(s.c.size());
  std::iota(order.begin(), order.end(), 0);
  auto score = [&](std::size_t i) { return std::fabs(-std::log(prob[i]) - h); };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (score(a) != score(b)) return score(a) < score(b);
    if (s.c[a].x != s.c[b].x) return s.c[a].x > s.c[b].x;
    return s.c[a].id < s.c[b].id;
  });
  std::vector<bool> keep(s.c.size(), false);
  double before = 0.0;
  for (std::size_t j = 0; j < order.size(); ++j) {
    if (j > 0) note(r, before, p);
    if (j > 0 && !(before < p)) break;
    keep[order[j]] = true;
    before += prob[order[j]];
  }
  for (std::size_t j = 0; j < std::min(min_keep, order.size()); ++j) keep[order[j]] = true;
  // Neighbouring scores that nearly tie can swap places across the cut.
  for (std::size_t j = 0; j + 1 < order.size(); ++j) note(r, score(order[j + 1]), score(order[j]));
  keep_where(s, keep);
  r.s = std::move(s);
  return r;
}

// top_n_sigma(n): keep x >= max - n * sigma, sigma the population standard deviation of the logits.
inline cut top_n_sigma(state s, double n) {
  cut r;
  if (s.st != status::ok || s.greedy || n <= 0.0 || s.c.size() < 2) return {s, r.margin};
  long double mean = 0.0L;
  for (auto& e : s.c) mean += e.x;
  mean /= static_cast<long double>(s.c.size());
  long double var = 0.0L;
  for (auto& e : s.c) var += (e.x - mean) * (e.x - mean);
  const double sigma = static_cast<double>(std::sqrt(var / static_cast<long double>(s.c.size())));
  const double t = max_logit(s.c) - n * sigma;
  std::vector<bool> keep(s.c.size());
  for (std::size_t i = 0; i < s.c.size(); ++i) {
    keep[i] = s.c[i].x >= t;
    if (sigma > 0.0) note(r, s.c[i].x, t);
  }
  keep_where(s, keep);
  r.s = std::move(s);
  return r;
}

// xtc(probability, threshold) for the coin u: if u < probability and threshold <= 0.5, and at least two
// tokens have p >= threshold, all of those but the least likely (lowest logit, then highest id) go;
// unless fewer than min_keep candidates would remain (then none go).
inline cut xtc(state s, double probability, double threshold, double u, std::size_t min_keep = 1) {
  cut r;
  if (s.st != status::ok || s.greedy || probability <= 0.0 || threshold > 0.5 || s.c.size() < 2)
    return {s, r.margin};
  if (!(u < probability)) return {s, r.margin};
  const auto prob = probabilities(s);
  std::vector<std::size_t> above;
  for (std::size_t i = 0; i < s.c.size(); ++i) {
    note(r, prob[i], threshold);
    if (prob[i] >= threshold) above.push_back(i);
  }
  if (above.size() < 2 || s.c.size() - (above.size() - 1) < min_keep) return {s, r.margin};
  std::size_t last = above[0];
  for (std::size_t i : above)
    if (s.c[i].x < s.c[last].x || (s.c[i].x == s.c[last].x && s.c[i].id > s.c[last].id)) last = i;
  std::vector<bool> keep(s.c.size(), true);
  for (std::size_t i : above) keep[i] = i == last;
  keep_where(s, keep);
  r.s = std::move(s);
  return r;
}

// Keeps p >= threshold and always the tokens whose logit is >= the min_keep-th largest (ties with it
// too, as Hugging Face; min_keep 1: those at the maximum).
inline cut keep_probable(state s, double threshold, std::size_t min_keep = 1) {
  cut r;
  const auto prob = probabilities(s);
  const double floor_x = ordered(s.c)[std::min(min_keep, s.c.size()) - 1].x;
  std::vector<bool> keep(s.c.size());
  for (std::size_t i = 0; i < s.c.size(); ++i) {
    keep[i] = prob[i] >= threshold || s.c[i].x >= floor_x;
    if (s.c[i].x < floor_x) note(r, prob[i], threshold);
  }
  keep_where(s, keep);
  r.s = std::move(s);
  return r;
}

inline cut epsilon_cutoff(state s, double e, std::size_t min_keep = 1) {
  if (s.st != status::ok || s.greedy || e <= 0.0 || s.c.size() < 2)
    return {s, std::numeric_limits<double>::infinity()};
  return keep_probable(std::move(s), e, min_keep);
}

inline cut eta_cutoff(state s, double eta, std::size_t min_keep = 1) {
  if (s.st != status::ok || s.greedy || eta <= 0.0 || s.c.size() < 2)
    return {s, std::numeric_limits<double>::infinity()};
  const double h = entropy(probabilities(s));
  return keep_probable(std::move(s), std::min(eta, std::sqrt(eta) * std::exp(-h)), min_keep);
}

// The temperature dynamic_temperature(t, range, exponent) gives this candidate set (at s.t).
inline double dynamic_temperature(const state& s, double t, double range, double exponent) {
  if (range <= 0.0 || s.c.size() < 2) return t;
  const double lo = std::max(0.0, t - range), hi = t + range;
  const double h = entropy(probabilities(s)) / std::log(static_cast<double>(s.c.size()));
  return lo + (hi - lo) * std::pow(std::min(1.0, std::max(0.0, h)), exponent);
}

// mirostat 2: keep -log2 p <= mu (at least the most likely token, the lowest id among ties).
inline cut mirostat_v2(state s, double mu) {
  cut r;
  if (s.st != status::ok || s.greedy) return {s, r.margin};
  const auto prob = probabilities(s);
  const double bound = std::exp2(-mu);
  std::vector<bool> keep(s.c.size());
  bool any = false;
  for (std::size_t i = 0; i < s.c.size(); ++i) {
    keep[i] = prob[i] >= bound;
    any = any || keep[i];
    note(r, prob[i], bound);
  }
  if (!any) {
    const auto top = ordered(s.c).front().id;
    for (std::size_t i = 0; i < s.c.size(); ++i) keep[i] = s.c[i].id == top;
  }
  keep_where(s, keep);
  r.s = std::move(s);
  return r;
}

// mirostat 1's k from the m most likely tokens (Zipf exponent by least squares), V the vocabulary.
inline double mirostat_k(const state& s, double mu, std::size_t m, std::size_t vocab) {
  auto o = ordered(s.c);
  double tb = 0.0, tt = 0.0;
  for (std::size_t i = 0; i + 1 < std::min(m, o.size()); ++i) {
    const double t = std::log(static_cast<double>(i + 2) / static_cast<double>(i + 1));
    const double b = (o[i].x - o[i + 1].x) / s.t;
    tb += t * b;
    tt += t * t;
  }
  const double sh = tb / tt, eh = sh - 1.0;
  return std::pow(eh * std::exp2(mu) / (1.0 - std::pow(static_cast<double>(vocab), -eh)), 1.0 / sh);
}

// mu after drawing a token of probability p: mu - eta * (-log2 p - tau).
inline double mirostat_update(double mu, double tau, double eta, double p) {
  return mu - eta * (-std::log2(p) - tau);
}

// Empty when the library's distribution `o` is the reference cut's; else what differs. A cut whose
// margin is under boundary_slack may go either way on the close tokens: then only the status is
// checked and `ambiguous` counts it.
inline std::string check_cut(const observed& o, const cut& c, const std::string& what,
                             int* ambiguous = nullptr) {
  const distribution d = finish(c.s);
  if (o.st != d.st) return what + ": status " + to_string(o.st) + ", reference " + to_string(d.st);
  if (d.st != status::ok) return {};
  std::vector<std::pair<std::int32_t, float>> got;
  for (std::size_t i = 0; i < o.ids.size(); ++i) got.emplace_back(o.ids[i], o.probs[i]);
  std::sort(got.begin(), got.end());
  bool same = got.size() == d.entries.size();
  for (std::size_t i = 0; same && i < got.size(); ++i) same = got[i].first == d.entries[i].id;
  if (!same) {
    if (c.margin < boundary_slack) {
      if (ambiguous) ++*ambiguous;
      return {};
    }
    return what + ": " + std::to_string(got.size()) + " survivors, reference " +
           std::to_string(d.entries.size()) + " (margin " + std::to_string(c.margin) + ")";
  }
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!prob_close(got[i].second, d.entries[i].prob))
      return what + ": token " + std::to_string(got[i].first) + " p=" + std::to_string(got[i].second) +
             ", reference " + std::to_string(d.entries[i].prob);
  return {};
}

}  // namespace nucleus_ref
