// An independent double-precision reference for the sampling semantics of docs/api.md, written from
// the specification alone (never from the kernels), plus the row generators, PRNG and statistics the
// tests share. Everything here is deliberately plain: sort, loop, exp in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <sstream>
#include <string>
#include <vector>

namespace nucleus_ref {

// ---------------------------------------------------------------------------------------------
// Tolerances: the library computes in float with its own exp (~2 ulp) and float sums.

inline constexpr double prob_rel_tol = 1e-5;
inline constexpr double prob_abs_tol = 1e-9;
// A top_p / min_p decision is "razor-close" when the reference quantity that decides it is within
// this of the parameter; either decision is then accepted. This is the only slack on survivor sets.
inline constexpr double boundary_slack = 1e-5;
// log-probabilities: 1e-5 absolute plus a few float ulps of the value (a float cannot hold -19999.123
// to 1e-5; its ulp there is ~2e-3).
inline double logprob_tol(double ref) {
  return 1e-5 + 4.0 * static_cast<double>(std::numeric_limits<float>::epsilon()) * std::fabs(ref);
}

inline bool prob_close(double lib, double ref) {
  return std::fabs(lib - ref) <= prob_rel_tol * std::fabs(ref) + prob_abs_tol;
}

// ---------------------------------------------------------------------------------------------
// Deterministic test data.

inline std::uint64_t splitmix64_next(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class rng {
 public:
  explicit rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() { return splitmix64_next(state_); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }
  double normal() {  // Box-Muller
    double u1 = 1.0 - uniform();
    double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::uint64_t state_;
};

inline constexpr float inf = std::numeric_limits<float>::infinity();
inline constexpr float nan = std::numeric_limits<float>::quiet_NaN();

enum class row_kind {
  uniform,        // U(-8, 8)
  peaky,          // Normal(0, 2.5) plus 1..4 spikes at +12..+16
  flat,           // c + U(-0.01, 0.01)
  all_equal,      // one constant
  neg_inf,        // uniform with ~30% -inf (at least one finite)
  pos_inf,        // uniform with 1..3 +inf, some -inf and NaN
  nan,            // peaky with ~30% NaN (at least one number)
  huge,           // sign * 10^U(4, 38.47): magnitudes 1e4 .. 3e38
  large,          // U(-1e4, 1e4) with a cluster of near-ties just below the top
  no_candidates,  // only NaN and -inf
};
inline constexpr row_kind all_row_kinds[] = {
    row_kind::uniform, row_kind::peaky, row_kind::flat, row_kind::all_equal, row_kind::neg_inf,
    row_kind::pos_inf, row_kind::nan,   row_kind::huge, row_kind::large,     row_kind::no_candidates};
// The kinds with at least one candidate.
inline constexpr row_kind candidate_row_kinds[] = {row_kind::uniform,   row_kind::peaky,   row_kind::flat,
                                                   row_kind::all_equal, row_kind::neg_inf, row_kind::pos_inf,
                                                   row_kind::nan,       row_kind::huge,    row_kind::large};

inline const char* to_string(row_kind k) {
  switch (k) {
    case row_kind::uniform:
      return "uniform";
    case row_kind::peaky:
      return "peaky";
    case row_kind::flat:
      return "flat";
    case row_kind::all_equal:
      return "all_equal";
    case row_kind::neg_inf:
      return "neg_inf";
    case row_kind::pos_inf:
      return "pos_inf";
    case row_kind::nan:
      return "nan";
    case row_kind::huge:
      return "huge";
    case row_kind::large:
      return "large";
    case row_kind::no_candidates:
      return "no_candidates";
  }
  return "?";
}

inline std::vector<float> uniform_row(std::size_t V, rng& g, double lo = -8.0, double hi = 8.0) {
  std::vector<float> row(V);
  for (auto& x : row) x = static_cast<float>(g.uniform(lo, hi));
  return row;
}

inline std::vector<float> peaky_row(std::size_t V, rng& g) {
  std::vector<float> row(V);
  for (auto& x : row) x = static_cast<float>(2.5 * g.normal());
  std::size_t spikes = 1 + g.below(4);
  for (std::size_t s = 0; s < spikes && V > 0; ++s)
    row[g.below(V)] = static_cast<float>(g.uniform(12.0, 16.0));
  return row;
}

inline std::vector<float> flat_row(std::size_t V, rng& g) {
  double c = g.uniform(-5.0, 5.0);
  std::vector<float> row(V);
  for (auto& x : row) x = static_cast<float>(c + g.uniform(-0.01, 0.01));
  return row;
}

inline std::vector<float> all_equal_row(std::size_t V, float value) {
  return std::vector<float>(V, value);
}

inline std::vector<float> huge_row(std::size_t V, rng& g) {
  std::vector<float> row(V);
  for (auto& x : row) {
    double mag = std::min(std::pow(10.0, g.uniform(4.0, 38.47)), static_cast<double>(3e38f));
    x = static_cast<float>(g.below(2) ? mag : -mag);
  }
  return row;
}

inline std::vector<float> large_row(std::size_t V, rng& g) {
  auto row = uniform_row(V, g, -1e4, 1e4);
  double top = g.uniform(9000.0, 1e4);
  std::size_t cluster = 1 + g.below(6);
  for (std::size_t s = 0; s < cluster && V > 0; ++s)
    row[g.below(V)] = static_cast<float>(top - g.uniform(0.0, 4.0));
  return row;
}

inline std::vector<float> make_row(row_kind kind, std::size_t V, rng& g) {
  switch (kind) {
    case row_kind::uniform:
      return uniform_row(V, g);
    case row_kind::peaky:
      return peaky_row(V, g);
    case row_kind::flat:
      return flat_row(V, g);
    case row_kind::all_equal:
      return all_equal_row(V, static_cast<float>(std::round(g.uniform(-20.0, 20.0) * 4) / 4));
    case row_kind::neg_inf: {
      auto row = uniform_row(V, g);
      for (auto& x : row)
        if (g.uniform() < 0.3) x = -inf;
      if (V > 0) row[g.below(V)] = static_cast<float>(g.uniform(-8.0, 8.0));
      return row;
    }
    case row_kind::pos_inf: {
      auto row = uniform_row(V, g);
      for (auto& x : row) {
        double u = g.uniform();
        if (u < 0.1)
          x = -inf;
        else if (u < 0.2)
          x = nan;
      }
      std::size_t n = 1 + g.below(3);
      for (std::size_t s = 0; s < n && V > 0; ++s) row[g.below(V)] = inf;
      return row;
    }
    case row_kind::nan: {
      auto row = peaky_row(V, g);
      for (auto& x : row)
        if (g.uniform() < 0.3) x = nan;
      if (V > 0) row[g.below(V)] = static_cast<float>(g.uniform(-8.0, 8.0));
      return row;
    }
    case row_kind::huge:
      return huge_row(V, g);
    case row_kind::large:
      return large_row(V, g);
    case row_kind::no_candidates: {
      std::vector<float> row(V);
      for (auto& x : row) x = g.below(2) ? nan : -inf;
      return row;
    }
  }
  return {};
}

// ---------------------------------------------------------------------------------------------
// The semantics.

enum class status { ok, no_candidates, empty_row };

inline const char* to_string(status s) {
  switch (s) {
    case status::ok:
      return "ok";
    case status::no_candidates:
      return "no_candidates";
    case status::empty_row:
      return "empty_row";
  }
  return "?";
}

enum class op { temperature, top_k, top_k_ties, top_p, min_p };  // top_k_ties: ties::keep
struct stage {
  op kind;
  double value;              // T, k, p or m
  std::size_t min_keep = 1;  // top_p, min_p: keep at least this many (the first in rank order)
};
inline stage temperature(double T) {
  return {op::temperature, T};
}
inline stage top_k(long long k) {
  return {op::top_k, static_cast<double>(k)};
}
inline stage top_k_ties(long long k) {
  return {op::top_k_ties, static_cast<double>(k)};
}
inline stage top_p(double p, std::size_t min_keep = 1) {
  return {op::top_p, p, min_keep};
}
inline stage min_p(double m, std::size_t min_keep = 1) {
  return {op::min_p, m, min_keep};
}

inline std::string describe(std::span<const stage> chain) {
  std::ostringstream os;
  os.precision(9);
  for (std::size_t i = 0; i < chain.size(); ++i) {
    if (i) os << " | ";
    switch (chain[i].kind) {
      case op::temperature:
        os << "temperature(" << chain[i].value << ")";
        break;
      case op::top_k:
        os << "top_k(" << static_cast<long long>(chain[i].value) << ")";
        break;
      case op::top_k_ties:
        os << "top_k(" << static_cast<long long>(chain[i].value) << ", ties::keep)";
        break;
      case op::top_p:
        os << "top_p(" << chain[i].value;
        if (chain[i].min_keep > 1) os << ", min_keep " << chain[i].min_keep;
        os << ")";
        break;
      case op::min_p:
        os << "min_p(" << chain[i].value;
        if (chain[i].min_keep > 1) os << ", min_keep " << chain[i].min_keep;
        os << ")";
        break;
    }
  }
  if (chain.empty()) os << "(no stages)";
  return os.str();
}

struct candidate {
  std::int32_t id;
  double x;  // the logit the stages see (0 for every token when the row has +inf)
};

// The state between stages: candidates in ascending id order, the temperature product so far.
struct state {
  status st = status::ok;
  std::vector<candidate> c;
  double t = 1.0;
  bool greedy = false;  // a temperature 0 was met: the result is {argmax: 1}
  std::int32_t greedy_id = -1;
  int ambiguous = 0;  // top_p / min_p decisions within boundary_slack
};

// Which way to decide a razor-close decision for a token: keep, drop, or the nominal decision.
enum class choice { keep, drop, nominal };
using guide_fn = std::function<choice(std::int32_t)>;

inline bool is_candidate(float x) {
  return !std::isnan(x) && x != -inf;
}

// Highest logit among the candidates, ties -> lowest id; -1 when none.
inline std::int32_t argmax(std::span<const float> row) {
  std::int32_t best = -1;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (!is_candidate(row[i])) continue;
    if (best < 0 || row[i] > row[static_cast<std::size_t>(best)]) best = static_cast<std::int32_t>(i);
  }
  return best;
}

inline state candidates(std::span<const float> row) {
  state s;
  if (row.empty()) {
    s.st = status::empty_row;
    return s;
  }
  bool any_pos_inf = std::any_of(row.begin(), row.end(), [](float x) { return x == inf; });
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (any_pos_inf) {
      if (row[i] == inf) s.c.push_back({static_cast<std::int32_t>(i), 0.0});
    } else if (is_candidate(row[i])) {
      s.c.push_back({static_cast<std::int32_t>(i), static_cast<double>(row[i])});
    }
  }
  if (s.c.empty()) s.st = status::no_candidates;
  return s;
}

// Candidates ordered by (logit desc, id asc).
inline std::vector<candidate> ordered(const std::vector<candidate>& c) {
  auto o = c;
  std::sort(o.begin(), o.end(),
            [](const candidate& a, const candidate& b) { return a.x != b.x ? a.x > b.x : a.id < b.id; });
  return o;
}

inline double max_logit(const std::vector<candidate>& c) {
  double m = -std::numeric_limits<double>::infinity();
  for (auto& e : c) m = std::max(m, e.x);
  return m;
}

// exp((x - max) / t) for each candidate, in the candidates' order.
inline std::vector<double> weights(const std::vector<candidate>& c, double t) {
  double m = max_logit(c);
  std::vector<double> w(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) w[i] = std::exp((c[i].x - m) / t);
  return w;
}

inline void by_id(std::vector<candidate>& c) {
  std::sort(c.begin(), c.end(), [](const candidate& a, const candidate& b) { return a.id < b.id; });
}

inline void apply_temperature(state& s, double T) {
  if (s.st != status::ok || s.greedy) return;
  if (T == 0.0) {
    s.greedy = true;
    s.greedy_id = ordered(s.c).front().id;
    return;
  }
  s.t *= T;
}

inline void apply_top_k(state& s, long long k) {
  if (s.st != status::ok || s.greedy || k <= 0 || static_cast<std::size_t>(k) >= s.c.size()) return;
  auto o = ordered(s.c);
  o.resize(static_cast<std::size_t>(k));
  by_id(o);
  s.c = std::move(o);
}

// top-k as vLLM and Hugging Face cut it: every token tied with the k-th (in rank order) is kept too.
inline void apply_top_k_ties(state& s, long long k) {
  if (s.st != status::ok || s.greedy || k <= 0 || static_cast<std::size_t>(k) >= s.c.size()) return;
  auto o = ordered(s.c);
  const double kth = o[static_cast<std::size_t>(k) - 1].x;
  std::vector<candidate> kept;
  for (auto& e : s.c)
    if (e.x >= kth) kept.push_back(e);
  s.c = std::move(kept);
}

// min_keep: at least that many survive, the first in rank order (all if there are fewer).
inline void apply_top_p(state& s, double p, const guide_fn* guide, std::size_t min_keep = 1) {
  if (s.st != status::ok || s.greedy || p >= 1.0) return;
  auto o = ordered(s.c);
  auto w = weights(o, s.t);
  double total = std::accumulate(w.begin(), w.end(), 0.0);
  // cum_before[i] is nondecreasing, so each rule keeps a prefix of o.
  std::size_t nominal = 0, lo = 0, hi = 0;
  double cum = 0.0;
  for (std::size_t i = 0; i < o.size(); ++i) {
    double before = cum / total;
    if (before < p) nominal = i + 1;
    if (before < p - boundary_slack) lo = i + 1;
    if (before < p + boundary_slack) hi = i + 1;
    cum += w[i];
  }
  lo = std::max<std::size_t>(lo, 1);  // the first token has nothing before it: always kept
  nominal = std::max(nominal, lo);
  std::size_t keep = nominal;
  if (hi > lo) {
    ++s.ambiguous;
    if (guide) {
      keep = lo;
      while (keep < hi && (*guide)(o[keep].id) == choice::keep) ++keep;
      if (keep < hi && (*guide)(o[keep].id) == choice::nominal) keep = std::max(keep, nominal);
    }
  }
  keep = std::max(keep, std::min(min_keep, o.size()));
  o.resize(keep);
  by_id(o);
  s.c = std::move(o);
}

// min_keep: when fewer survive, the first min_keep in rank order do instead (all if there are fewer).
inline void apply_min_p(state& s, double m, const guide_fn* guide, std::size_t min_keep = 1) {
  if (s.st != status::ok || s.greedy || m <= 0.0) return;
  double mx = max_logit(s.c);
  double threshold = std::log(m);
  std::vector<candidate> kept;
  bool ambiguous = false;
  for (auto& e : s.c) {
    double d = (e.x - mx) / s.t;
    bool keep = d >= threshold;
    if (d != 0.0 && std::fabs(std::exp(d) - m) <= boundary_slack) {
      ambiguous = true;
      if (guide && (*guide)(e.id) != choice::nominal) keep = (*guide)(e.id) == choice::keep;
    }
    if (keep) kept.push_back(e);
  }
  if (ambiguous) ++s.ambiguous;
  if (kept.size() < min_keep) {
    kept = ordered(s.c);
    kept.resize(std::min(min_keep, kept.size()));
    by_id(kept);
  }
  s.c = std::move(kept);
}

inline state run(std::span<const float> row, std::span<const stage> chain, const guide_fn* guide = nullptr) {
  state s = candidates(row);
  for (const stage& st : chain) {
    switch (st.kind) {
      case op::temperature:
        apply_temperature(s, st.value);
        break;
      case op::top_k:
        apply_top_k(s, static_cast<long long>(st.value));
        break;
      case op::top_k_ties:
        apply_top_k_ties(s, static_cast<long long>(st.value));
        break;
      case op::top_p:
        apply_top_p(s, st.value, guide, st.min_keep);
        break;
      case op::min_p:
        apply_min_p(s, st.value, guide, st.min_keep);
        break;
    }
  }
  return s;
}

struct entry {
  std::int32_t id;
  double prob;
  double logprob;
};

// The processed distribution: survivors in ascending id order with their renormalized
// probabilities at the final temperature.
struct distribution {
  status st = status::ok;
  std::vector<entry> entries;
  bool greedy = false;
  int ambiguous = 0;

  const entry* find(std::int32_t id) const {
    auto it = std::lower_bound(entries.begin(), entries.end(), id,
                               [](const entry& e, std::int32_t v) { return e.id < v; });
    return it != entries.end() && it->id == id ? &*it : nullptr;
  }
};

inline distribution finish(const state& s) {
  distribution d;
  d.st = s.st;
  d.ambiguous = s.ambiguous;
  if (s.st != status::ok) return d;
  if (s.greedy) {
    d.greedy = true;
    d.entries.push_back({s.greedy_id, 1.0, 0.0});
    return d;
  }
  auto w = weights(s.c, s.t);
  double total = std::accumulate(w.begin(), w.end(), 0.0);
  double m = max_logit(s.c);
  double log_total = std::log(total);
  for (std::size_t i = 0; i < s.c.size(); ++i)
    d.entries.push_back({s.c[i].id, w[i] / total, (s.c[i].x - m) / s.t - log_total});
  return d;
}

inline distribution process(std::span<const float> row, std::span<const stage> chain,
                            const guide_fn* guide = nullptr) {
  return finish(run(row, chain, guide));
}

// log_softmax at T = 1. +inf tokens share the mass (-log n each); -inf gives -inf; NaN gives NaN.
inline std::vector<double> log_softmax(std::span<const float> row) {
  std::vector<double> out(row.size());
  state s = candidates(row);
  if (s.st != status::ok) {
    for (std::size_t i = 0; i < row.size(); ++i)
      out[i] = std::isnan(row[i]) ? std::numeric_limits<double>::quiet_NaN()
                                  : -std::numeric_limits<double>::infinity();
    return out;
  }
  distribution d = finish(s);
  for (std::size_t i = 0; i < row.size(); ++i)
    out[i] = std::isnan(row[i]) ? std::numeric_limits<double>::quiet_NaN()
                                : -std::numeric_limits<double>::infinity();
  for (auto& e : d.entries) out[static_cast<std::size_t>(e.id)] = e.logprob;
  return out;
}

struct token_logprob {
  std::int32_t token;
  double logprob;
};

// The n most likely candidates at T = 1, descending, ties -> lower id first.
inline std::vector<token_logprob> top_logprobs(std::span<const float> row, std::size_t n) {
  state s = candidates(row);
  std::vector<token_logprob> out;
  if (s.st != status::ok) return out;
  distribution d = finish(s);
  auto o = ordered(s.c);
  for (std::size_t i = 0; i < o.size() && i < n; ++i) out.push_back({o[i].id, d.find(o[i].id)->logprob});
  return out;
}

// ---------------------------------------------------------------------------------------------
// Checking what the library returned.

// A distribution copied out of the library (its view dies with the next call on the workspace).
struct observed {
  status st = status::ok;
  std::vector<std::int32_t> ids;
  std::vector<float> probs;
  bool sorted = false;
};

inline std::string context(std::span<const float> row, std::span<const stage> chain) {
  std::ostringstream os;
  os << "V=" << row.size() << " chain=" << describe(chain);
  return os.str();
}

// The reference with razor-close decisions following `member` (the library's survivors). A token the
// library lacks may have been cut at the close call or by a later stage: both readings are tried and
// the one that reproduces the library's set is returned (else the first).
inline distribution guided_reference(std::span<const float> row, std::span<const stage> chain,
                                     const std::vector<char>& member) {
  auto guided = [&](choice absent) {
    guide_fn guide = [&, absent](std::int32_t id) {
      return member[static_cast<std::size_t>(id)] ? choice::keep : absent;
    };
    return process(row, chain, &guide);
  };
  std::size_t n = static_cast<std::size_t>(std::count(member.begin(), member.end(), char{1}));
  auto same_set = [&](const distribution& d) {
    if (d.entries.size() != n) return false;
    for (auto& e : d.entries)
      if (!member[static_cast<std::size_t>(e.id)]) return false;
    return true;
  };
  distribution ref = guided(choice::nominal);
  if (!same_set(ref) && ref.ambiguous > 0) {
    distribution alt = guided(choice::drop);
    if (same_set(alt)) return alt;
  }
  return ref;
}

// Empty when the library's distribution agrees with the reference; otherwise what is wrong.
// Razor-close top_p / min_p decisions follow the library's choice (guided reference), then the set
// must match exactly and every probability within prob_close.
inline std::string check_distribution(std::span<const float> row, std::span<const stage> chain,
                                      const observed& lib) {
  std::ostringstream err;
  err.precision(10);
  const std::size_t V = row.size();
  distribution nominal = process(row, chain);
  if (lib.st != nominal.st) {
    err << context(row, chain) << ": status " << to_string(lib.st) << ", reference " << to_string(nominal.st);
    return err.str();
  }
  if (lib.ids.size() != lib.probs.size()) return context(row, chain) + ": ids and probs differ in size";
  if (nominal.st != status::ok) {
    if (!lib.ids.empty())
      err << context(row, chain) << ": " << lib.ids.size() << " entries with status " << to_string(lib.st);
    return err.str();
  }
  std::vector<char> member(V, 0);
  for (std::size_t i = 0; i < lib.ids.size(); ++i) {
    std::int32_t id = lib.ids[i];
    if (id < 0 || static_cast<std::size_t>(id) >= V) {
      err << context(row, chain) << ": id " << id << " out of range";
      return err.str();
    }
    if (member[static_cast<std::size_t>(id)]) {
      err << context(row, chain) << ": id " << id << " twice";
      return err.str();
    }
    member[static_cast<std::size_t>(id)] = 1;
  }
  // Order (docs/semantics.md): sorted -> rank order, (logit desc, id asc), which makes the
  // probabilities non-increasing; otherwise ascending id. +inf tokens rank among themselves by id.
  const bool forced = std::any_of(row.begin(), row.end(), [](float x) { return x == inf; });
  auto rank_logit = [&](std::int32_t id) { return forced ? 0.0f : row[static_cast<std::size_t>(id)]; };
  for (std::size_t i = 1; i < lib.ids.size(); ++i) {
    bool ok;
    std::int32_t a = lib.ids[i - 1], b = lib.ids[i];
    if (lib.sorted) {
      float xa = rank_logit(a), xb = rank_logit(b);
      ok = (xa > xb || (xa == xb && a < b)) && lib.probs[i - 1] >= lib.probs[i];
    } else {
      ok = a < b;
    }
    if (!ok) {
      err << context(row, chain) << ": order broken at " << i << " (sorted=" << lib.sorted << "): id " << a
          << " (logit " << row[static_cast<std::size_t>(a)] << ", p " << lib.probs[i - 1] << ") then id " << b
          << " (logit " << row[static_cast<std::size_t>(b)] << ", p " << lib.probs[i] << ")";
      return err.str();
    }
  }
  distribution ref = guided_reference(row, chain, member);
  std::vector<float> lib_prob(V, -1.0f);
  for (std::size_t i = 0; i < lib.ids.size(); ++i)
    lib_prob[static_cast<std::size_t>(lib.ids[i])] = lib.probs[i];
  for (auto& e : ref.entries) {
    if (!member[static_cast<std::size_t>(e.id)]) {
      err << context(row, chain) << ": token " << e.id << " (logit " << row[static_cast<std::size_t>(e.id)]
          << ", p " << e.prob << ") missing; library kept " << lib.ids.size() << ", reference "
          << ref.entries.size();
      return err.str();
    }
  }
  if (ref.entries.size() != lib.ids.size()) {
    for (std::size_t i = 0; i < lib.ids.size(); ++i) {
      if (!ref.find(lib.ids[i])) {
        err << context(row, chain) << ": token " << lib.ids[i] << " (logit "
            << row[static_cast<std::size_t>(lib.ids[i])] << ", p " << lib.probs[i]
            << ") should not survive; library kept " << lib.ids.size() << ", reference "
            << ref.entries.size();
        return err.str();
      }
    }
  }
  for (auto& e : ref.entries) {
    double p = lib_prob[static_cast<std::size_t>(e.id)];
    if (!prob_close(p, e.prob)) {
      err << context(row, chain) << ": token " << e.id << " p " << p << ", reference " << e.prob
          << " (rel err " << (p - e.prob) / e.prob << ")";
      return err.str();
    }
  }
  return {};
}

// A draw: the token must be a survivor of `lib_dist` (the library's own distribution for the same
// row and chain, already checked) and its logprob the reference's; greedy results have logprob 0.
inline std::string check_draw(std::span<const float> row, std::span<const stage> chain,
                              const observed& lib_dist, status st, std::int32_t token, float logprob) {
  std::ostringstream err;
  err.precision(10);
  distribution nominal = process(row, chain);
  if (st != nominal.st) {
    err << context(row, chain) << ": draw status " << to_string(st) << ", reference "
        << to_string(nominal.st);
    return err.str();
  }
  if (st != status::ok) {
    if (token != -1) err << context(row, chain) << ": token " << token << " with status " << to_string(st);
    return err.str();
  }
  std::vector<char> member(row.size(), 0);
  for (auto id : lib_dist.ids)
    if (id >= 0 && static_cast<std::size_t>(id) < row.size()) member[static_cast<std::size_t>(id)] = 1;
  distribution ref = guided_reference(row, chain, member);
  const entry* e = ref.find(token);
  if (!e || !member[static_cast<std::size_t>(token)]) {
    err << context(row, chain) << ": drew token " << token << ", not a survivor";
    return err.str();
  }
  if (ref.greedy) {
    if (logprob != 0.0f) err << context(row, chain) << ": greedy draw has logprob " << logprob;
    return err.str();
  }
  if (!(std::fabs(logprob - e->logprob) <= logprob_tol(e->logprob))) {
    err << context(row, chain) << ": token " << token << " logprob " << logprob << ", reference "
        << e->logprob;
  }
  return err.str();
}

// The draw rule of docs/semantics.md: u = (mix(seed ^ mix(position + phi)) >> 11) * 2^-53 with SplitMix64's
// finalizer; the token is the first survivor, in the distribution's order, whose running sum exceeds u.
inline std::uint64_t splitmix64_finalize(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline double draw_uniform(std::uint64_t seed, std::uint64_t position) {
  std::uint64_t bits = splitmix64_finalize(seed ^ splitmix64_finalize(position + 0x9E3779B97F4A7C15ull));
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// The positions in `order` the draw may land on for uniform u: the exact one for reference
// probabilities, widened to its neighbours when u is within `slack` of a running-sum boundary.
struct draw_range {
  std::size_t lo, hi;  // inclusive
};
inline draw_range draw_positions(const std::vector<double>& probs_in_order, double u, double slack = 1e-5) {
  auto first_above = [&](double v) {
    double cum = 0.0;
    for (std::size_t i = 0; i < probs_in_order.size(); ++i) {
      cum += probs_in_order[i];
      if (cum > v) return i;
    }
    return probs_in_order.empty() ? std::size_t{0} : probs_in_order.size() - 1;
  };
  return {first_above(u - slack), first_above(u + slack)};
}

// ---------------------------------------------------------------------------------------------
// Statistics.

// Upper quantile of chi-square with df degrees of freedom at the normal deviate z (Wilson-Hilferty).
// z = 6.0 puts the false-failure probability near 1e-9.
inline double chi_square_quantile(double df, double z) {
  double a = 2.0 / (9.0 * df);
  double c = 1.0 - a + z * std::sqrt(a);
  return df * c * c * c;
}

struct chi_square_result {
  double statistic = 0;
  int df = 0;
  double critical = 0;
  std::uint64_t outside = 0;  // draws of tokens with probability 0
  bool pass() const { return outside == 0 && df > 0 && statistic <= critical; }
};

// Pearson chi-square of counts[i] against n * probs[i]; categories with expected count < 5 are
// pooled (and the pool merged into the smallest bin if it is still under 5).
inline chi_square_result chi_square(std::span<const std::uint64_t> counts, std::span<const double> probs,
                                    double z = 6.0) {
  chi_square_result r;
  std::uint64_t n = 0;
  for (auto c : counts) n += c;
  std::vector<std::pair<double, double>> bins;  // (expected, observed)
  double pool_e = 0, pool_o = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    double e = probs[i] * static_cast<double>(n);
    if (probs[i] <= 0.0) {
      r.outside += counts[i];
      continue;
    }
    if (e < 5.0) {
      pool_e += e;
      pool_o += static_cast<double>(counts[i]);
    } else {
      bins.push_back({e, static_cast<double>(counts[i])});
    }
  }
  if (pool_e > 0) {
    if (pool_e < 5.0 && !bins.empty()) {
      auto smallest = std::min_element(bins.begin(), bins.end());
      smallest->first += pool_e;
      smallest->second += pool_o;
    } else {
      bins.push_back({pool_e, pool_o});
    }
  }
  for (auto& [e, o] : bins) r.statistic += (o - e) * (o - e) / e;
  r.df = static_cast<int>(bins.size()) - 1;
  r.critical = r.df > 0 ? chi_square_quantile(r.df, z) : 0.0;
  return r;
}

// ---------------------------------------------------------------------------------------------
// Hashing for the identity recorder.

inline std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  return h;
}
inline constexpr std::uint64_t fnv_offset = 0xCBF29CE484222325ull;

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

}  // namespace nucleus_ref
