// nucleus against llama.cpp and Hugging Face, case by case, from fixtures the engines' own code
// recorded (tests/peers/record_*.py). Every case is identical, or explained: the survivor sets differ
// only by the order of tied tokens, or nucleus equals the exact double-precision answer and the peer's
// float arithmetic moved its cut. Unexplained differences fail. The table is printed for the notes.
// Each case runs with the peer's own min_keep (llama.cpp) or min_tokens_to_keep (Hugging Face).
#include <catch2/catch.hpp>

#include <nucleus/engine.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "reference/cases.hpp"
#include "reference/samplers.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using json = nlohmann::json;

namespace {

json load(const char* name) {
  const char* dir = std::getenv("NUCLEUS_PEER_FIXTURES");
  if (!dir || !*dir) dir = std::getenv("NUCLEUS_PEER_FIXTURES_DEFAULT");
  REQUIRE(dir != nullptr);
  std::ifstream in(std::string(dir) + "/" + name);
  REQUIRE(in.good());
  return json::parse(in);
}

float num(const json& v) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "-inf") return -ref::inf;
    if (s == "inf") return ref::inf;
    return ref::nan;
  }
  return v.get<float>();
}
std::vector<float> floats(const json& a) {
  std::vector<float> out;
  for (const auto& v : a) out.push_back(num(v));
  return out;
}
std::vector<std::int32_t> ints(const json& a) {
  std::vector<std::int32_t> out;
  for (const auto& v : a) out.push_back(v.get<std::int32_t>());
  return out;
}

// A fixture file with its rows and histories read out.
struct fixture {
  json file;
  std::vector<std::vector<float>> rows;
  std::vector<std::vector<std::int32_t>> histories;
};
fixture read_fixture(const char* name) {
  fixture fx{load(name), {}, {}};
  for (const auto& r : fx.file["rows"]) fx.rows.push_back(floats(r));
  for (const auto& h : fx.file["histories"]) fx.histories.push_back(ints(h));
  return fx;
}

struct tally {
  // identical; tie order: nucleus equals the exact answer and the peer differs only in which tied ids it
  // kept; ties kept: the peer also keeps every token tied with its cut; peer NaN: llama.cpp's typical takes 0
  // * log 0 on a -inf entry; peer rounding: nucleus equals the exact double answer and the peer's float
  // arithmetic does not; definition: the peer counts differently, and each side equals the exact answer under
  // its own definition.
  std::size_t cases = 0, identical = 0, ties = 0, ties_kept = 0, peer_nan = 0, rounding = 0, definition = 0,
              unexplained = 0;
  std::size_t rounding_shown = 0;  // peer rounding recomputed: the peer's own float arithmetic gives its cut
  double max_prob_diff = 0.0, max_logit_diff = 0.0;
  std::string first;
};

// The peer's survivors (finite logits: llama.cpp masks some stages with -inf instead of removing).
std::set<std::int32_t> peer_set(const json& c) {
  std::set<std::int32_t> s;
  const auto ids = ints(c["ids"]);
  const auto lg = floats(c["logits"]);
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (lg[i] > -ref::inf) s.insert(ids[i]);
  return s;
}
std::set<std::int32_t> lib_set(const nc::distribution& d) {
  return {d.ids().begin(), d.ids().end()};
}
std::set<std::int32_t> ref_set(const ref::state& s) {
  std::set<std::int32_t> out;
  if (s.st != ref::status::ok) return out;
  if (s.greedy) return {s.greedy_id};
  for (auto& e : s.c) out.insert(e.id);
  return out;
}

// Sets that differ only among tokens tied in value with a token of the other set's boundary.
bool only_ties(const std::set<std::int32_t>& a, const std::set<std::int32_t>& b,
               const std::vector<float>& row) {
  if (a.size() != b.size()) return false;
  std::multiset<float> va, vb;
  for (auto t : a) va.insert(row[static_cast<std::size_t>(t)]);
  for (auto t : b) vb.insert(row[static_cast<std::size_t>(t)]);
  return va == vb;
}

bool subset(const std::set<std::int32_t>& a, const std::set<std::int32_t>& b) {
  return std::includes(b.begin(), b.end(), a.begin(), a.end());
}

// The peer's min_keep as nucleus takes it: llama.cpp's 0 keeps at least one token, as 1 does.
int min_keep_of(const json& params) {
  for (const char* k : {"min_keep", "min_tokens_to_keep"})
    if (params.contains(k)) return std::max(1, params[k].get<int>());
  return 1;
}

// llama.cpp's typical on an array that still holds -inf entries (float, as llama_sampler_typical_apply
// computes it): their p is 0, and 0 * log 0 makes the entropy NaN.
float peer_typical_entropy(const std::vector<float>& logits) {
  float mx = -ref::inf;
  for (float x : logits) mx = std::max(mx, x);
  float sum = 0.0f;
  std::vector<float> p(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(logits[i] - mx);
  float h = 0.0f;
  for (float& q : p) {
    q /= sum;
    h += -q * std::log(q);
  }
  return h;
}

void classify(tally& t, const std::string& what, const json& c, const std::set<std::int32_t>& peer,
              const std::set<std::int32_t>& lib, const std::set<std::int32_t>& exact, double margin,
              const std::vector<float>& row) {
  ++t.cases;
  if (peer != lib && std::getenv("NUCLEUS_PEER_VERBOSE")) {
    std::cout << what << ": peer " << peer.size() << ", nucleus " << lib.size() << ", exact " << exact.size()
              << "; only peer:";
    for (auto id : peer)
      if (!lib.count(id)) std::cout << " " << id << "=" << row[static_cast<std::size_t>(id)];
    std::cout << "; only nucleus:";
    for (auto id : lib)
      if (!peer.count(id)) std::cout << " " << id << "=" << row[static_cast<std::size_t>(id)];
    std::cout << "\n";
  }
  const std::string sampler = c["sampler"];
  bool extras_tied = subset(lib, peer) && lib != peer;
  if (extras_tied) {
    std::set<float> kept;
    for (auto id : lib) kept.insert(row[static_cast<std::size_t>(id)]);
    for (auto id : peer)
      if (!lib.count(id)) extras_tied = extras_tied && kept.count(row[static_cast<std::size_t>(id)]) == 1;
  }
  const bool has_neg_inf = std::any_of(row.begin(), row.end(), [](float x) { return x == -ref::inf; });
  if (peer == lib) {
    ++t.identical;
  } else if (only_ties(peer, lib, row) && lib == exact) {
    ++t.ties;
  } else if (extras_tied && lib == exact) {
    ++t.ties_kept;
  } else if (sampler == "typical" && has_neg_inf && lib == exact && c.contains("sorted") &&
             std::isnan(peer_typical_entropy(row))) {  // llama.cpp's entropy over the row it received
    ++t.peer_nan;
  } else if (lib == exact || margin < ref::boundary_slack) {
    ++t.rounding;
  } else {
    if (t.unexplained++ == 0)
      t.first = what + ": peer " + std::to_string(peer.size()) + " survivors, nucleus " +
                std::to_string(lib.size()) + ", exact " + std::to_string(exact.size());
  }
}

// The peer's distribution over its survivors (finite logits): its own p when it computed them (llama.cpp
// computes them before it cuts, so they are renormalized here), else the softmax of its logits.
std::map<std::int32_t, double> peer_probs(const json& c) {
  const auto ids = ints(c["ids"]);
  const auto lg = floats(c["logits"]);
  std::vector<double> p(ids.size(), 0.0);
  const bool own = c.contains("probs") && !c["probs"].is_null();
  const auto pp = own ? floats(c["probs"]) : std::vector<float>{};
  double m = -ref::inf;
  for (float x : lg) m = std::max(m, static_cast<double>(x));
  double z = 0.0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (!(lg[i] > -ref::inf)) continue;
    p[i] = own ? static_cast<double>(pp[i]) : std::exp(static_cast<double>(lg[i]) - m);
    z += p[i];
  }
  std::map<std::int32_t, double> out;
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (lg[i] > -ref::inf) out[ids[i]] = p[i] / z;
  return out;
}

// The largest |p_nucleus - p_peer| over the survivors.
double prob_diff(const json& c, const nc::distribution& d) {
  const auto peer = peer_probs(c);
  double worst = 0.0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const auto it = peer.find(d.ids()[i]);
    worst =
        std::max(worst, std::fabs((it == peer.end() ? 0.0 : it->second) - static_cast<double>(d.probs()[i])));
  }
  return worst;
}
void compare_probs(tally& t, const json& c, const nc::distribution& d) {
  t.max_prob_diff = std::max(t.max_prob_diff, prob_diff(c, d));
}

void print(const char* peer, const std::map<std::string, tally>& table) {
  std::cout << "\n"
            << peer
            << " parity: sampler | cases | identical | tie order | ties kept | peer NaN | peer rounding"
               " | definition | unexplained | max |dp| | max |dlogit or dmu|\n";
  for (const auto& [name, t] : table)
    std::cout << "  " << name << " | " << t.cases << " | " << t.identical << " | " << t.ties << " | "
              << t.ties_kept << " | " << t.peer_nan << " | " << t.rounding << " | " << t.definition << " | "
              << t.unexplained << " | " << t.max_prob_diff << " | " << t.max_logit_diff << "\n";
}

// A processed row (bias, penalties, DRY, no-repeat-ngram) against the peer's, token by token.
void compare_row(tally& t, const std::string& what, const json& c, const float* got, std::size_t V) {
  ++t.cases;
  const auto ids = ints(c["ids"]);
  const auto lg = floats(c["logits"]);
  bool same = true;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto id = static_cast<std::size_t>(ids[i]);
    if (id >= V) continue;
    const float a = got[id], b = lg[i];
    if (a == b) continue;
    if (std::isinf(a) || std::isinf(b)) {  // an infinity matches only itself
      same = false;
      t.max_logit_diff = ref::inf;
      continue;
    }
    const double d = std::fabs(static_cast<double>(a) - static_cast<double>(b));
    t.max_logit_diff = std::max(t.max_logit_diff, d);
    if (d > 1e-6 * std::max(1.0, std::fabs(static_cast<double>(b)))) same = false;
  }
  if (same) {
    ++t.identical;
  } else if (t.unexplained++ == 0) {
    t.first = what;
  }
}

// The cuts both peers have, with each peer's own knob value: nucleus's distribution, the exact set
// from the double reference, and its margin (0 where the reference found the cut ambiguous).
struct cut_result {
  nc::distribution d;
  double margin = ref::inf;
  std::set<std::int32_t> exact;
};
cut_result shared_cut(const std::string& name, float v, int keep, std::span<const float> r, nc::workspace& ws,
                      ref::state s) {
  const auto keep_n = static_cast<std::size_t>(keep);
  cut_result out;
  if (name == "top_p") {
    out.d = nc::top_p(v, keep)(r, ws);
    ref::apply_top_p(s, static_cast<double>(v), nullptr, keep_n);
  } else if (name == "min_p") {
    out.d = nc::min_p(v, keep)(r, ws);
    ref::apply_min_p(s, static_cast<double>(v), nullptr, keep_n);
  } else {  // typical
    out.d = nc::typical(v, keep)(r, ws);
    const auto cut = ref::typical(s, static_cast<double>(v), keep_n);
    out.margin = cut.margin;
    out.exact = ref_set(cut.s);
    return out;
  }
  out.margin = s.ambiguous ? 0.0 : ref::inf;
  out.exact = ref_set(s);
  return out;
}

}  // namespace

namespace {
// llama.cpp's top_p and typical walk their output order adding the p it computed (float softmax) into
// a float running sum, and stop at the first token where the sum reaches p (top_p: >=, typical: >).
// True when that walk, recomputed on the recorded p, keeps exactly the recorded tokens.
bool peer_float_walk_gives_its_cut(const json& c, float p, bool strictly_above) {
  if (!c.contains("probs") || c["probs"].is_null()) return false;
  const auto probs = floats(c["probs"]);
  const std::size_t keep_floor = static_cast<std::size_t>(min_keep_of(c["params"]));
  float sum = 0.0f;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    sum += probs[i];
    const bool reached = strictly_above ? sum > p : sum >= p;
    if (reached && i + 1 >= keep_floor) return i + 1 == probs.size();
  }
  return false;  // the recorded prefix never reaches p: the peer stopped for another reason
}
}  // namespace

TEST_CASE("peers: llama.cpp's samplers", "[peers][llama_cpp]") {
  const auto [f, rows, hist] = read_fixture("llama_cpp.json");
  std::map<std::string, tally> table;
  nc::workspace ws;
  std::size_t index = 0;
  for (const auto& c : f["cases"]) {
    const std::string name = c["sampler"];
    const auto& row = rows[c["row"].get<std::size_t>()];
    const json& p = c["params"];
    const std::string what = name + " case " + std::to_string(index++) + " " + p.dump();
    tally& t = table[name];
    ref::state s = ref::candidates(row);
    const std::span<const float> r(row);
    const int keep = min_keep_of(p);  // run with the peer's own min_keep
    const auto keep_n = static_cast<std::size_t>(keep);
    if (name == "top_k" || name == "top_p" || name == "min_p" || name == "typical" || name == "top_n_sigma" ||
        name == "xtc") {
      nc::distribution d;
      double margin = ref::inf;
      std::set<std::int32_t> exact;
      if (name == "top_k") {
        d = nc::top_k(p["k"].get<int>())(r, ws);
        ref::apply_top_k(s, p["k"].get<int>());
        exact = ref_set(s);
      } else if (name == "top_p" || name == "min_p" || name == "typical") {
        auto cut = shared_cut(name, p["p"].get<float>(), keep, r, ws, s);
        d = cut.d;
        margin = cut.margin;
        exact = std::move(cut.exact);
      } else if (name == "top_n_sigma") {
        d = nc::top_n_sigma(p["n"].get<float>())(r, ws);
        const auto cut = ref::top_n_sigma(s, static_cast<double>(p["n"].get<float>()));
        margin = cut.margin;
        exact = ref_set(cut.s);
      } else {
        const float prob = p["probability"].get<float>(), thr = p["threshold"].get<float>();
        d = nc::xtc(prob, thr, keep)(r, ws, nc::draw_key{0, 0});  // probability 0 or 1: the coin is moot
        const auto cut = ref::xtc(s, static_cast<double>(prob), static_cast<double>(thr), 0.0, keep_n);
        margin = cut.margin;
        exact = ref_set(cut.s);
      }
      const auto lib = lib_set(d);
      const std::size_t rounded = t.rounding;
      classify(t, what, c, peer_set(c), lib, exact, margin, row);
      if (t.rounding > rounded && (name == "top_p" || name == "typical") &&
          peer_float_walk_gives_its_cut(c, p["p"].get<float>(), name == "typical"))
        ++t.rounding_shown;
      if (peer_set(c) == lib && c.contains("probs") && !c["probs"].is_null()) compare_probs(t, c, d);
    } else if (name == "temp" || name == "temp_ext") {
      const float temp = p["temp"].get<float>();
      const nc::distribution d = name == "temp"
                                     ? nc::temperature(std::max(temp, 0.0f))(r, ws)
                                     : nc::dynamic_temperature(std::max(temp, 0.0f), p["delta"].get<float>(),
                                                               p["exponent"].get<float>())(r, ws);
      std::set<std::int32_t> exact = ref_set(s);
      if (temp <= 0.0f) {
        ref::apply_temperature(s, 0.0);
        exact = ref_set(s);
      }
      const auto lib = lib_set(d);
      classify(t, what, c, peer_set(c), lib, exact, ref::inf, row);
      if (peer_set(c) != lib) continue;
      const double diff = prob_diff(c, d);
      const float delta = name == "temp_ext" ? p["delta"].get<float>() : 0.0f;
      if (diff >= 1e-5 && delta > 0.0f && temp > 0.0f) {
        // llama.cpp's ln n counts every entry of its array, -inf ones too; nucleus counts candidates.
        // Explained when the peer equals the exact answer under its own count, and nucleus under ours.
        auto exact_probs = [&](std::size_t n) {
          const double h = ref::entropy(ref::probabilities(s)) / std::log(static_cast<double>(n));
          const double lo = std::max(0.0, static_cast<double>(temp) - delta),
                       hi = static_cast<double>(temp) + delta;
          ref::state st = s;
          ref::apply_temperature(
              st, lo + (hi - lo) * std::pow(h, static_cast<double>(p["exponent"].get<float>())));
          std::map<std::int32_t, double> out;
          for (const auto& e : ref::finish(st).entries) out[e.id] = e.prob;
          return out;
        };
        const auto theirs = exact_probs(row.size()), ours = exact_probs(s.c.size());
        double peer_off = 0.0, lib_off = 0.0;
        for (const auto& [id, q] : peer_probs(c)) peer_off = std::max(peer_off, std::fabs(q - theirs.at(id)));
        for (std::size_t i = 0; i < d.size(); ++i)
          lib_off = std::max(lib_off, std::fabs(static_cast<double>(d.probs()[i]) - ours.at(d.ids()[i])));
        if (peer_off < 1e-5 && lib_off < 1e-5) {
          --t.identical;
          ++t.definition;
          continue;
        }
      }
      t.max_prob_diff = std::max(t.max_prob_diff, diff);
    } else if (name == "penalties" || name == "logit_bias" || name == "dry") {
      nc::sampling_params sp;
      sp.temperature = 1.0f;
      std::vector<std::int32_t> h =
          c["history"].is_null() ? std::vector<std::int32_t>{} : hist[c["history"].get<std::size_t>()];
      // llama.cpp's C API clamps a negative last_n to 0 (off); "-1 = the context" lives only in its
      // common layer, which the llama_cpp preset follows (-1: all). The fixtures come from the C API.
      if (name == "penalties") {
        sp.penalty_last_n = std::max(0, p["penalty_last_n"].get<int>());
        sp.repetition_penalty = p["penalty_repeat"].get<float>();
        sp.frequency_penalty = p["penalty_freq"].get<float>();
        sp.presence_penalty = p["penalty_present"].get<float>();
      } else if (name == "logit_bias") {
        // A -inf bias bans the token in llama.cpp; nucleus takes finite biases only and says "ban"
        // with banned_token_ids.
        for (const auto& b : p["logit_bias"]) {
          const int id = b[0].get<int>();
          if (id < 0 || static_cast<std::size_t>(id) >= row.size()) continue;
          if (num(b[1]) == -ref::inf) {
            sp.banned_token_ids.push_back(id);
          } else {
            sp.logit_bias.push_back({id, num(b[1])});
          }
        }
      } else {
        sp.dry_multiplier = p["dry_multiplier"].get<float>();
        sp.dry_base = p["dry_base"].get<float>();
        sp.dry_allowed_length = p["dry_allowed_length"].get<int>();
        sp.dry_penalty_last_n = std::max(0, p["dry_penalty_last_n"].get<int>());
        // llama.cpp makes every token whose text contains a breaker string a one-token breaker; the
        // recorder listed them from the vocabulary (every history id is below its id_limit).
        const json& single = f["dry_vocab"]["single_token_breakers"];
        for (const auto& str : p["seq_breakers"])
          for (const auto& id : single[str.get<std::string>()])
            sp.dry_sequence_breakers.push_back({id.get<std::int32_t>()});
      }
      // llama.cpp ignores logit_bias entries outside the vocabulary; nucleus would reject the row.
      nc::detail::processors procs(sp, nc::engine_order::llama_cpp);
      const nc::row_request rq{{}, h, {}, 0};
      if (!procs.fits(row.size(), rq)) {
        ++t.cases;
        ++t.unexplained;
        if (t.first.empty()) t.first = what + ": history does not fit the row";
        continue;
      }
      const float* got = procs.active(rq) ? procs.apply(r, ws, rq) : row.data();
      compare_row(t, what, c, got, row.size());
    } else if (name == "mirostat" || name == "mirostat_v2") {
      const float tau = p["tau"].get<float>(), eta = p["eta"].get<float>();
      float mu = c["mu_in"].get<float>();
      nc::row_state st(r, ws);
      if (name == "mirostat") {
        REQUIRE(p["n_vocab"].get<std::size_t>() == row.size());
        nc::mirostat(tau, eta, mu, p["m"].get<int>()).truncate(st);
      } else {
        nc::mirostat_v2(tau, eta, mu).truncate(st);
      }
      const nc::distribution d = nc::materialize(st);
      const auto lib = lib_set(d);
      std::set<std::int32_t> exact;  // the exact truncation, from the reference
      double margin = ref::inf;
      if (name == "mirostat_v2") {
        const auto cut = ref::mirostat_v2(s, static_cast<double>(c["mu_in"].get<float>()));
        exact = ref_set(cut.s);
        margin = cut.margin;
      } else {
        // top max(1, floor(k)) in rank order (all when k is not a number below the count)
        const double k = ref::mirostat_k(s, c["mu_in"].get<float>(), p["m"].get<std::size_t>(), row.size());
        const std::size_t keep = !(k < static_cast<double>(s.c.size())) ? s.c.size()
                                 : k >= 1.0                             ? static_cast<std::size_t>(k)
                                                                        : 1;
        ref::apply_top_k(s, static_cast<long long>(keep));
        exact = ref_set(s);
        margin = std::fabs(k - std::round(k)) / std::max(1.0, k);  // k near an integer: either way
      }
      classify(t, what, c, peer_set(c), lib, exact, margin, row);
      // mu's update for the token the peer drew, with nucleus's probability of it.
      const std::int32_t sel = c["selected_id"].get<std::int32_t>();
      for (std::size_t i = 0; i < d.size(); ++i)
        if (d.ids()[i] == sel) {
          const double want = ref::mirostat_update(c["mu_in"].get<float>(), tau, eta, d.probs()[i]);
          t.max_logit_diff = std::max(t.max_logit_diff, std::fabs(want - c["mu_out"].get<double>()));
        }
      if (peer_set(c) == lib) compare_probs(t, c, d);
    } else {
      FAIL("unknown sampler " << name);
    }
  }
  print("llama.cpp", table);
  for (const char* name : {"top_k", "top_p", "min_p", "typical", "top_n_sigma", "xtc", "temp", "temp_ext",
                           "penalties", "logit_bias", "dry", "mirostat", "mirostat_v2"})
    CHECK(table.count(name) == 1);  // a fixture that lost a sampler fails
  for (const auto& [name, t] : table) {
    INFO(name << ": " << t.first);
    CHECK(t.cases >= 15);
    CHECK(t.unexplained == 0);
    CHECK(t.max_prob_diff < 1e-5);
    CHECK(t.rounding * 50 <= t.cases);      // under 2%
    CHECK(t.rounding_shown == t.rounding);  // each one recomputed: the peer's float walk gives its cut
  }
  CHECK(table["mirostat"].max_logit_diff < 1e-4);     // mu
  CHECK(table["mirostat_v2"].max_logit_diff < 1e-4);  // mu
}

TEST_CASE("peers: Hugging Face's logits processors", "[peers][hf]") {
  const auto [f, rows, hist] = read_fixture("hf.json");
  std::map<std::string, tally> table;
  nc::workspace ws;
  std::size_t index = 0;
  for (const auto& c : f["cases"]) {
    const std::string name = c["sampler"];
    const auto& row = rows[c["row"].get<std::size_t>()];
    const json& p = c["params"];
    const std::string what = name + " case " + std::to_string(index++) + " " + p.dump();
    tally& t = table[name];
    ref::state s = ref::candidates(row);
    const std::span<const float> r(row);
    const int keep = min_keep_of(p);  // run with the peer's own min_tokens_to_keep
    const auto keep_n = static_cast<std::size_t>(keep);
    if (name == "repetition_penalty" || name == "no_repeat_ngram") {
      nc::sampling_params sp;
      if (name == "repetition_penalty") sp.repetition_penalty = p["penalty"].get<float>();
      if (name == "no_repeat_ngram") sp.no_repeat_ngram_size = p["ngram_size"].get<int>();
      const auto h = hist[c["history"].get<std::size_t>()];
      nc::detail::processors procs(sp, nc::engine_order::hf);
      const nc::row_request rq{h, {}, {}, 0};
      const float* got = procs.active(rq) ? procs.apply(r, ws, rq) : row.data();
      if (name == "no_repeat_ngram") {
        std::set<std::int32_t> lib, exact;
        for (std::size_t i = 0; i < row.size(); ++i)
          if (got[i] > -ref::inf) lib.insert(static_cast<std::int32_t>(i));
        // By definition: a token is banned when the last n-1 tokens followed by it occur earlier.
        const auto n = static_cast<std::size_t>(sp.no_repeat_ngram_size);
        std::set<std::int32_t> banned;
        for (std::size_t j = 0; n > 0 && h.size() + 1 >= n && j + n <= h.size(); ++j)
          if (std::equal(h.end() - static_cast<std::ptrdiff_t>(n - 1), h.end(),
                         h.begin() + static_cast<std::ptrdiff_t>(j)))
            banned.insert(h[j + n - 1]);
        for (const auto& e : s.c)
          if (!banned.count(e.id)) exact.insert(e.id);
        classify(t, what, c, peer_set(c), lib, exact, ref::inf, row);
      } else {
        compare_row(t, what, c, got, row.size());
      }
      continue;
    }
    nc::distribution d;
    double margin = ref::inf;
    std::set<std::int32_t> exact;
    if (name == "temperature") {
      d = nc::temperature(p["temperature"].get<float>())(r, ws);
      exact = ref_set(s);
    } else if (name == "top_k") {
      d = nc::top_k(p["top_k"].get<int>(), nc::ties::keep, keep)(r, ws);
      ref::apply_top_k_ties(s, std::max(p["top_k"].get<int>(), keep));  // HF raises k to min_keep
      exact = ref_set(s);
    } else if (name == "top_p" || name == "min_p" || name == "typical") {
      // HF accepts top_p = 0 and keeps its min_tokens_to_keep tokens; nucleus requires p > 0, and its
      // smallest p keeps exactly the rank-first token, then min_keep the first min_keep.
      const float v = name == "top_p"   ? std::max(p["top_p"].get<float>(), std::numeric_limits<float>::min())
                      : name == "min_p" ? p["min_p"].get<float>()
                                        : p["mass"].get<float>();
      auto cut = shared_cut(name, v, keep, r, ws, s);
      d = cut.d;
      margin = cut.margin;
      exact = std::move(cut.exact);
    } else if (name == "epsilon") {
      d = nc::epsilon_cutoff(p["epsilon"].get<float>(), keep)(r, ws);
      const auto cut = ref::epsilon_cutoff(s, static_cast<double>(p["epsilon"].get<float>()), keep_n);
      margin = cut.margin;
      exact = ref_set(cut.s);
    } else if (name == "eta") {
      d = nc::eta_cutoff(p["epsilon"].get<float>(), keep)(r, ws);
      const auto cut = ref::eta_cutoff(s, static_cast<double>(p["epsilon"].get<float>()), keep_n);
      margin = cut.margin;
      exact = ref_set(cut.s);
    } else {
      FAIL("unknown sampler " << name);
    }
    const auto lib = lib_set(d);
    classify(t, what, c, peer_set(c), lib, exact, margin, row);
    if (peer_set(c) == lib) compare_probs(t, c, d);
  }
  print("Hugging Face", table);
  for (const char* name : {"temperature", "top_k", "top_p", "min_p", "typical", "epsilon", "eta",
                           "repetition_penalty", "no_repeat_ngram"})
    CHECK(table.count(name) == 1);
  for (const auto& [name, t] : table) {
    INFO(name << ": " << t.first);
    CHECK(t.cases >= 15);
    CHECK(t.unexplained == 0);
    CHECK(t.max_prob_diff < 1e-5);
    CHECK(t.rounding * 50 <= t.cases);  // under 2%
  }
}

namespace {

float knob(const json& p, const char* name, float off) {
  return p.contains(name) ? p[name].get<float>() : off;
}

}  // namespace

TEST_CASE("peers: llama.cpp's chains, random knob sets in its order", "[peers][llama_cpp][chains]") {
  const auto [f, rows, hist] = read_fixture("llama_cpp_chains.json");
  tally t;
  std::size_t neg_inf_differs = 0, nan_shown = 0, native_ties = 0, typical_after_top_cut = 0;
  nc::workspace ws;
  std::size_t index = 0;
  for (const auto& c : f["cases"]) {
    REQUIRE(c["sampler"] == "chain");
    const auto& row = rows[c["row"].get<std::size_t>()];
    const json& p = c["params"];
    const std::string what =
        "chain case " + std::to_string(index++) + " V=" + std::to_string(row.size()) + " " + p.dump();
    nc::sampling_params sp;
    sp.temperature = knob(p, "temp", 1.0f);
    sp.dynatemp_range = knob(p, "dynatemp_range", 0.0f);
    sp.dynatemp_exponent = knob(p, "dynatemp_exponent", 1.0f);
    sp.top_k = static_cast<int>(knob(p, "top_k", 0.0f));
    sp.typical_p = knob(p, "typical_p", 1.0f);
    sp.top_p = knob(p, "top_p", 1.0f);
    sp.min_p = knob(p, "min_p", 0.0f);
    sp.top_n_sigma = knob(p, "top_n_sigma", -1.0f);
    sp.xtc_probability = knob(p, "xtc_probability", 0.0f);
    sp.xtc_threshold = knob(p, "xtc_threshold", 0.1f);
    sp.repetition_penalty = knob(p, "penalty_repeat", 1.0f);
    sp.frequency_penalty = knob(p, "penalty_freq", 0.0f);
    sp.presence_penalty = knob(p, "penalty_present", 0.0f);
    sp.penalty_last_n = static_cast<int>(knob(p, "penalty_last_n", 64.0f));
    const std::vector<std::int32_t> h =
        c["history"].is_null() ? std::vector<std::int32_t>{} : hist[c["history"].get<std::size_t>()];
    const nc::row_request rq{{}, h, {}, 0};
    const nc::sampler smp(sp, nc::engine_order::llama_cpp);
    const nc::distribution d = smp.process(std::span<const float>(row), ws, rq);
    const std::set<std::int32_t> lib = lib_set(d);

    // The exact chain, in double, on the processed row (the penalties' own parity is the
    // "penalties" table above).
    nc::detail::processors procs(sp, nc::engine_order::llama_cpp);
    std::vector<float> processed(row);
    if (procs.active(rq)) {
      const float* got = procs.apply(std::span<const float>(row), ws, rq);
      processed.assign(got, got + row.size());
    }
    ref::state s = ref::candidates(processed);
    double margin = ref::inf;
    auto take = [&](const ref::cut& cut) {
      s = cut.s;
      margin = std::min(margin, cut.margin);
    };
    auto ambiguity = [&](decltype(s.ambiguous) before) {
      if (s.ambiguous > before) margin = 0.0;
    };
    if (sp.top_n_sigma > 0.0f) take(ref::top_n_sigma(s, static_cast<double>(sp.top_n_sigma)));
    if (sp.top_k > 0) ref::apply_top_k(s, sp.top_k);
    if (sp.typical_p < 1.0f) {
      const std::int32_t top = ref::argmax(processed);
      take(ref::typical(s, static_cast<double>(sp.typical_p)));
      const bool kept = std::any_of(s.c.begin(), s.c.end(), [&](const auto& e) { return e.id == top; });
      if (!kept && sp.min_p > 0.0f) ++typical_after_top_cut;
    }
    auto amb = s.ambiguous;
    if (sp.top_p < 1.0f) ref::apply_top_p(s, static_cast<double>(sp.top_p), nullptr);
    ambiguity(amb);
    amb = s.ambiguous;
    if (sp.min_p > 0.0f) ref::apply_min_p(s, static_cast<double>(sp.min_p), nullptr);
    ambiguity(amb);
    if (sp.xtc_probability > 0.0f)
      take(ref::xtc(s, static_cast<double>(sp.xtc_probability), static_cast<double>(sp.xtc_threshold), 0.0));
    const double T = static_cast<double>(sp.temperature);
    ref::apply_temperature(s,
                           T > 0.0 && sp.dynatemp_range > 0.0f
                               ? ref::dynamic_temperature(s, T, static_cast<double>(sp.dynatemp_range), 1.0)
                               : T);
    classify(t, what, c, peer_set(c), lib, ref_set(s), margin, processed);
    if (peer_set(c) == lib) compare_probs(t, c, d);

    // Where keeping llama.cpp's -inf entries between its samplers changes the survivors: either the
    // same values with other tied ids (its top-k's partial sort is not stable, and the array differs),
    // or its typical received -inf entries and the entropy it computed over them is NaN.
    if (c.contains("native")) {
      const json& n = c["native"];
      auto values = [](const json& lg) {
        std::multiset<float> out;
        for (float x : floats(lg))
          if (x > -ref::inf) out.insert(x);
        return out;
      };
      if (values(n["logits"]) == values(c["logits"])) {
        ++native_ties;
        continue;
      }
      ++neg_inf_differs;
      INFO(what);
      REQUIRE(!n["typical_input"].is_null());
      const auto in = floats(n["typical_input"]);
      CHECK(std::any_of(in.begin(), in.end(), [](float x) { return x == -ref::inf; }));
      if (std::isnan(peer_typical_entropy(in))) ++nan_shown;
    }
  }
  print("llama.cpp chains", {{"chain", t}});
  std::cout << "  with llama.cpp's -inf entries kept between samplers, " << neg_inf_differs + native_ties
            << " of " << t.cases << " differ: " << native_ties << " by tie order only, " << neg_inf_differs
            << " otherwise, and typical's entropy is NaN in " << nan_shown << " of those\n";
  INFO(t.first);
  CHECK(t.cases >= 1000);
  CHECK(t.unexplained == 0);
  CHECK(t.max_prob_diff < 1e-5);
  CHECK(t.rounding * 50 <= t.cases);  // cases decided by rounding or an ambiguous margin: under 2%
  CHECK(nan_shown == neg_inf_differs);
  CHECK(neg_inf_differs > 0);
  CHECK(typical_after_top_cut >= 20);  // the chains this table is for: typical took the top, min-p follows
}
