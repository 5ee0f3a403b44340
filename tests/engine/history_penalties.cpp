// DRY and no-repeat-ngram against brute-force references written from their definitions, and the
// engine fields of the new samplers: validation, the presets' placement and rejections, mirostat's mu.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "engine/engine_cases.hpp"
#include "reference/samplers.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;
using Catch::Matchers::Contains;

namespace {

// DRY by its definition, O(n^2): for each earlier position j, the longest run ending at j that equals
// the run ending at the last token (capped by the most recent breaker); the token after j gets it.
std::vector<float> dry_reference(std::vector<float> row, const std::vector<std::int32_t>& h, float mult,
                                 float base, int allowed,
                                 const std::vector<std::vector<std::int32_t>>& breakers) {
  const std::size_t n = h.size();
  if (n <= static_cast<std::size_t>(allowed)) return row;
  std::size_t limit = n;
  for (std::size_t i = 0; i < n; ++i) {  // i tokens from the end
    long long best = -1;
    for (const auto& b : breakers) {
      if (b[0] != h[n - 1 - i] || b.size() - 1 > i) continue;
      bool ok = true;
      for (std::size_t o = 1; o < b.size(); ++o) ok = ok && h[n - 1 - i + o] == b[o];
      if (ok) best = std::max(best, static_cast<long long>(b.size() - 1));
    }
    if (best >= 0) {
      limit = i - static_cast<std::size_t>(best);
      break;
    }
  }
  if (limit < static_cast<std::size_t>(allowed)) return row;
  std::map<std::int32_t, std::size_t> longest;
  for (std::size_t j = 0; j + 1 < n; ++j) {
    std::size_t len = 0;
    while (len <= j && h[j - len] == h[n - 1 - len]) ++len;
    len = std::min(len, limit);
    if (len < static_cast<std::size_t>(allowed)) continue;
    auto [it, fresh] = longest.emplace(h[j + 1], len);
    if (!fresh) it->second = std::max(it->second, len);
  }
  const int max_exp =
      base > 1.000001f ? static_cast<int>(88.7228391 / std::log(static_cast<double>(base))) : 0;
  for (auto [t, len] : longest) {
    bool single = false;
    for (const auto& b : breakers) single = single || (b.size() == 1 && b[0] == t);
    if (single) continue;
    int e = static_cast<int>(len) - allowed;
    if (max_exp > 0 && e > max_exp) e = max_exp;
    row[static_cast<std::size_t>(t)] -=
        static_cast<float>(static_cast<double>(mult) * std::pow(static_cast<double>(base), e));
  }
  return row;
}

std::set<std::int32_t> no_repeat_reference(const std::vector<std::int32_t>& h, std::size_t size) {
  std::set<std::int32_t> banned;
  if (size == 0 || h.size() + 1 < size) return banned;
  const std::vector<std::int32_t> tail(h.end() - static_cast<std::ptrdiff_t>(size - 1), h.end());
  for (std::size_t j = 0; j + size <= h.size(); ++j)
    if (std::equal(tail.begin(), tail.end(), h.begin() + static_cast<std::ptrdiff_t>(j)))
      banned.insert(h[j + size - 1]);
  return banned;
}

std::vector<std::int32_t> random_history(ref::rng& g, std::size_t n, std::size_t alphabet) {
  std::vector<std::int32_t> h;
  while (h.size() < n) {
    if (h.size() > 4 && g.below(3) == 0) {  // copy an earlier run: real repeats
      const std::size_t from = g.below(h.size() - 2), len = 1 + g.below(6);
      for (std::size_t i = 0; i < len && h.size() < n; ++i) h.push_back(h[from + i]);
    } else {
      h.push_back(static_cast<std::int32_t>(g.below(alphabet)));
    }
  }
  return h;
}

}  // namespace

TEST_CASE("dry: penalties equal the brute-force definition", "[engine][dry]") {
  ref::rng g(0xD27);
  nc::workspace ws;
  std::size_t penalized = 0;
  for (int c = 0; c < 400; ++c) {
    const std::size_t V = 64;
    std::vector<float> row(V);
    for (auto& x : row) x = static_cast<float>(g.uniform(-5, 5));
    const auto h = random_history(g, 1 + g.below(120), 2 + g.below(12));
    const std::size_t split = g.below(h.size() + 1);  // prompt / output: DRY reads both
    nc::sampling_params p;
    p.dry_multiplier = static_cast<float>(g.uniform(0.1, 2.0));
    p.dry_base = c % 7 == 0 ? 1.0f : static_cast<float>(g.uniform(1.0, 3.0));
    p.dry_allowed_length = static_cast<int>(g.below(4));
    if (g.below(2)) p.dry_sequence_breakers = {{static_cast<std::int32_t>(g.below(12))}};
    if (g.below(3) == 0)
      p.dry_sequence_breakers.push_back(
          {static_cast<std::int32_t>(g.below(12)), static_cast<std::int32_t>(g.below(12))});
    p.dry_penalty_last_n = g.below(3) == 0 ? static_cast<int>(1 + g.below(h.size())) : -1;
    const std::vector<std::int32_t> last(
        h.end() - static_cast<std::ptrdiff_t>(
                      p.dry_penalty_last_n < 0 ? h.size() : static_cast<std::size_t>(p.dry_penalty_last_n)),
        h.end());
    const auto want =
        dry_reference(row, last, p.dry_multiplier, p.dry_base, p.dry_allowed_length, p.dry_sequence_breakers);
    p.temperature = 0.0f;  // only the processed row matters here
    const nc::sampler s(p, nc::engine_order::llama_cpp);
    const std::vector<std::int32_t> prompt(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(split)),
        output(h.begin() + static_cast<std::ptrdiff_t>(split), h.end());
    const nc::row_request rq{prompt, output, {}, 0};
    nc::detail::processors procs(p, nc::engine_order::llama_cpp);
    const float* got = procs.active(rq) ? procs.apply(std::span<const float>(row), ws, rq) : row.data();
    for (std::size_t i = 0; i < V; ++i) {
      INFO("case " << c << " token " << i);
      REQUIRE(got[i] == want[i]);
      penalized += got[i] != row[i];
    }
    (void)s;
  }
  CHECK(penalized > 200);  // the cases do penalize
  // counts stay all zero between rows
  for (std::size_t i = 0; i < 64; ++i) CHECK(ws.counts.data()[i] == 0u);
}

TEST_CASE("no_repeat_ngram: banned tokens equal the brute-force definition", "[engine][no_repeat_ngram]") {
  ref::rng g(0x4E6);
  nc::workspace ws;
  std::size_t banned_total = 0;
  for (int c = 0; c < 400; ++c) {
    const std::size_t V = 40;
    std::vector<float> row(V, 1.0f);
    const auto h = random_history(g, 1 + g.below(60), 2 + g.below(10));
    nc::sampling_params p;
    p.no_repeat_ngram_size = static_cast<int>(1 + g.below(4));
    nc::detail::processors procs(p, nc::engine_order::hf);
    const nc::row_request rq{h, {}, {}, 0};
    const float* got = procs.apply(std::span<const float>(row), ws, rq);
    const auto want = no_repeat_reference(h, static_cast<std::size_t>(p.no_repeat_ngram_size));
    for (std::size_t i = 0; i < V; ++i) {
      INFO("case " << c << " token " << i);
      CHECK((got[i] == -ref::inf) == (want.count(static_cast<std::int32_t>(i)) == 1));
    }
    banned_total += want.size();
  }
  CHECK(banned_total > 100);
}

TEST_CASE("engine params: the new fields are validated, naming the field", "[engine][params]") {
  const float nan_f = ref::nan, inf_f = ref::inf;
  const std::vector<std::pair<const char*, std::function<void(nc::sampling_params&)>>> bad = {
      {"typical_p", [](auto& p) { p.typical_p = 0.0f; }},
      {"typical_p", [&](auto& p) { p.typical_p = nan_f; }},
      {"top_n_sigma", [&](auto& p) { p.top_n_sigma = inf_f; }},
      {"xtc_probability", [](auto& p) { p.xtc_probability = 1.5f; }},
      {"xtc_threshold", [](auto& p) { p.xtc_threshold = -0.1f; }},
      {"epsilon_cutoff", [](auto& p) { p.epsilon_cutoff = 1.0f; }},
      {"eta_cutoff", [&](auto& p) { p.eta_cutoff = nan_f; }},
      {"dynatemp_range", [&](auto& p) { p.dynatemp_range = inf_f; }},
      {"dynatemp_exponent", [](auto& p) { p.dynatemp_exponent = -1.0f; }},
      {"mirostat", [](auto& p) { p.mirostat = 3; }},
      {"mirostat_tau", [](auto& p) { p.mirostat_tau = -1.0f; }},
      {"mirostat_eta", [&](auto& p) { p.mirostat_eta = nan_f; }},
      {"dry_multiplier", [](auto& p) { p.dry_multiplier = -1.0f; }},
      {"dry_base", [](auto& p) { p.dry_base = 0.5f; }},
      {"dry_allowed_length", [](auto& p) { p.dry_allowed_length = -1; }},
      {"dry_penalty_last_n", [](auto& p) { p.dry_penalty_last_n = -2; }},
      {"dry_sequence_breakers", [](auto& p) { p.dry_sequence_breakers = {{}}; }},
      {"dry_sequence_breakers",
       [](auto& p) {
         p.dry_sequence_breakers = {{3, -1}};
       }},
      {"no_repeat_ngram_size", [](auto& p) { p.no_repeat_ngram_size = -1; }},
  };
  for (auto order : {nc::engine_order::nucleus, nc::engine_order::vllm, nc::engine_order::hf,
                     nc::engine_order::llama_cpp}) {
    for (const auto& [field, set] : bad) {
      INFO("order " << static_cast<int>(order) << " field " << field);
      nc::sampling_params p;
      set(p);
      CHECK_THROWS_WITH(nc::sampler(p, order), Contains(field));
    }
  }
}

TEST_CASE("presets: each rejects the fields its engine has no stage for", "[engine][params]") {
  struct field {
    const char* name;
    std::function<void(nc::sampling_params&)> set;
    bool vllm, hf, llama_cpp;
  };
  const std::vector<field> fields = {
      {"typical_p", [](auto& p) { p.typical_p = 0.9f; }, false, true, true},
      {"top_n_sigma", [](auto& p) { p.top_n_sigma = 1.0f; }, false, false, true},
      {"xtc_probability", [](auto& p) { p.xtc_probability = 0.5f; }, false, false, true},
      {"epsilon_cutoff", [](auto& p) { p.epsilon_cutoff = 1e-3f; }, false, true, false},
      {"eta_cutoff", [](auto& p) { p.eta_cutoff = 1e-3f; }, false, true, false},
      {"dynatemp_range", [](auto& p) { p.dynatemp_range = 0.5f; }, false, false, true},
      {"mirostat", [](auto& p) { p.mirostat = 2; }, false, false, true},
      {"dry_multiplier", [](auto& p) { p.dry_multiplier = 0.8f; }, false, false, true},
      {"no_repeat_ngram_size", [](auto& p) { p.no_repeat_ngram_size = 3; }, false, true, false},
      {"presence_penalty", [](auto& p) { p.presence_penalty = 0.5f; }, true, false, true},
  };
  for (const auto& f : fields) {
    INFO(f.name);
    nc::sampling_params p;
    f.set(p);
    CHECK_NOTHROW(nc::presets::nucleus(p));
    if (f.vllm)
      CHECK_NOTHROW(nc::presets::vllm(p));
    else
      CHECK_THROWS_WITH(nc::presets::vllm(p), Contains(f.name));
    if (f.hf)
      CHECK_NOTHROW(nc::presets::hf(p));
    else
      CHECK_THROWS_WITH(nc::presets::hf(p), Contains(f.name));
    if (f.llama_cpp)
      CHECK_NOTHROW(nc::presets::llama_cpp(p));
    else
      CHECK_THROWS_WITH(nc::presets::llama_cpp(p), Contains(f.name));
  }
  // mirostat replaces the truncation stages; llama.cpp applies no penalty with it.
  nc::sampling_params p;
  p.mirostat = 1;
  p.top_k = 40;
  CHECK_THROWS_WITH(nc::presets::nucleus(p), Contains("top_k"));
  p.top_k = 0;
  p.repetition_penalty = 1.1f;
  CHECK_NOTHROW(nc::presets::nucleus(p));
  CHECK_THROWS_WITH(nc::presets::llama_cpp(p), Contains("repetition_penalty"));
}

TEST_CASE("presets: the new stages run where the engine runs them", "[engine][orders]") {
  ref::rng g(0x0D3);
  nc::workspace ws, ws2;
  for (int c = 0; c < 60; ++c) {
    const auto row = ref::make_row(ref::row_kind::peaky, 2000, g);
    nc::sampling_params p;
    p.temperature = static_cast<float>(g.uniform(0.3, 1.5));
    p.top_k = g.below(2) ? 0 : 50;
    p.typical_p = 0.9f;
    p.top_p = 0.95f;
    p.min_p = 0.02f;
    p.seed = g.next();
    const nc::draw_key key{p.seed, 3};
    const nc::row_request rq{{}, {}, {}, 3};
    nc::sampling_params l = p;
    l.top_n_sigma = 1.5f;
    l.xtc_probability = 0.7f;
    l.dynatemp_range = 0.4f;
    const auto lib =
        nucleus_cases::observe(nc::presets::llama_cpp(l).process(std::span<const float>(row), ws, rq));
    const auto want = nucleus_cases::observe((
        nc::top_n_sigma(1.5f) | nc::top_k(p.top_k) | nc::typical(0.9f) | nc::top_p(0.95f) | nc::min_p(0.02f) |
        nc::xtc(0.7f, 0.1f) | nc::dynamic_temperature(p.temperature, 0.4f, 1.0f))(row, ws2, key));
    CHECK(lib.ids == want.ids);
    CHECK(lib.probs == want.probs);
    nc::sampling_params h = p;
    h.epsilon_cutoff = 3e-4f;
    h.eta_cutoff = 1e-3f;
    const auto hl = nucleus_cases::observe(nc::presets::hf(h).process(std::span<const float>(row), ws, rq));
    const auto hw = nucleus_cases::observe(
        (nc::temperature(p.temperature) | nc::top_k(p.top_k, nc::ties::keep) | nc::top_p(0.95f) |
         nc::min_p(0.02f) | nc::typical(0.9f) | nc::epsilon_cutoff(3e-4f) | nc::eta_cutoff(1e-3f))(row, ws2));
    CHECK(hl.ids == hw.ids);
    CHECK(hl.probs == hw.probs);
  }
}

TEST_CASE("sampler: mirostat reads and updates the request's mu", "[engine][mirostat]") {
  nc::workspace ws;
  ref::rng g(0x317);
  const auto row = ref::make_row(ref::row_kind::peaky, 1000, g);
  for (int version : {1, 2}) {
    nc::sampling_params p;
    p.mirostat = version;
    p.mirostat_tau = 4.0f;
    p.seed = 99;
    const nc::sampler s(p, nc::engine_order::llama_cpp);
    nc::row_request rq{{}, {}, {}, 0};
    CHECK(s.sample(std::span<const float>(row), ws, rq).status == nc::status::invalid_input);  // no mu
    float mu = nc::mirostat_initial_mu(p.mirostat_tau), mu2 = mu;
    for (std::uint64_t pos = 0; pos < 20; ++pos) {
      rq.position = pos;
      rq.mirostat_mu = &mu;
      const auto a = s.sample(std::span<const float>(row), ws, rq);
      // The same step with the stage itself, on a copy of mu.
      const auto b = version == 1 ? nc::mirostat(4.0f, 0.1f, mu2)(row, ws, nc::draw_key{99, pos})
                                  : nc::mirostat_v2(4.0f, 0.1f, mu2)(row, ws, nc::draw_key{99, pos});
      CHECK(a.status == nc::status::ok);
      CHECK(a.token == b.token);
      CHECK(mu == mu2);
    }
    CHECK(mu != nc::mirostat_initial_mu(p.mirostat_tau));
  }
}
