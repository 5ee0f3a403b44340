// Speculative verification (engine/speculative.hpp): the emitted tokens follow the target's processed
// distribution whatever the draft (chi-square over 10^6 trials per case, false-failure probability
// near 1e-9 each), the acceptance count follows its closed form, greedy is the argmax rule, bad input
// has its documented answer, and batches give the single call's bits.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "nucleus/engine/batch.hpp"
#include "nucleus/engine/speculative.hpp"
#include "reference/reference.hpp"

namespace nc = nucleus;

namespace {

constexpr std::size_t V = 8;

// softmax(logits) in double, kept to the `keep` largest (ties cannot occur in these rows).
std::vector<double> target_p(const std::vector<float>& logits, std::size_t keep = V) {
  std::vector<double> p(V);
  double m = -1e300, z = 0;
  for (float x : logits) m = std::max(m, static_cast<double>(x));
  std::vector<std::size_t> order(V);
  for (std::size_t i = 0; i < V; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return logits[a] > logits[b]; });
  for (std::size_t r = 0; r < keep; ++r) z += std::exp(static_cast<double>(logits[order[r]]) - m);
  for (std::size_t r = 0; r < keep; ++r)
    p[order[r]] = std::exp(static_cast<double>(logits[order[r]]) - m) / z;
  return p;
}

std::int32_t draw(const std::vector<double>& q, std::mt19937_64& g) {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(g);
  double s = 0;
  for (std::size_t i = 0; i < q.size(); ++i) {
    s += q[i];
    if (u < s && q[i] > 0) return static_cast<std::int32_t>(i);
  }
  for (std::size_t i = q.size(); i-- > 0;)
    if (q[i] > 0) return static_cast<std::int32_t>(i);
  return 0;
}

struct exactness_case {
  const char* name;
  std::vector<float> logits;
  std::size_t top_k;      // the target sampler's top_k (V: none)
  std::vector<double> q;  // the draft's distribution, from which its token is drawn
  bool with_probs;        // false: the verifier gets no q (n-gram drafts)
};

// The drafts every exactness check runs: targets with and without top-k, drafts near and far.
std::vector<exactness_case> exactness_cases() {
  const std::vector<float> peaked = {6.0f, 2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f};
  const std::vector<float> flat = {0.30f, 0.25f, 0.20f, 0.15f, 0.10f, 0.05f, 0.0f, -0.05f};
  const std::vector<double> uniform(V, 1.0 / V);
  const std::vector<double> last3 = {0, 0, 0, 0, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3};
  std::vector<double> q_peaked = target_p(peaked);
  std::vector<double> q_skew = {0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.1, 0.6};
  return {
      {"identical", flat, V, target_p(flat), true},
      {"disjoint (top-3 target, draft on the last 3)", flat, 3, last3, true},
      {"peaked target, flat draft", peaked, V, uniform, true},
      {"flat target, peaked draft", flat, V, q_peaked, true},
      {"draft mass where the top-k target has none", peaked, 4, q_skew, true},
      {"top-k target, draft = the untruncated target", peaked, 2, target_p(peaked), true},
      {"no draft probabilities (one-hot), skewed proposals", flat, V, q_skew, false},
      {"no draft probabilities, top-k target", peaked, 3, uniform, false},
  };
}

}  // namespace

TEST_CASE("verify_draft: the emitted token follows the target's distribution for any draft",
          "[engine][speculative]") {
  const std::vector<exactness_case> cases = exactness_cases();
  constexpr std::uint64_t trials = 1'000'000;
  nc::draft_verifier verifier;
  nc::workspace ws;
  std::mt19937_64 g(2026);
  for (const exactness_case& c : cases) {
    const nc::sampler s(nc::sampling_params{.top_k = c.top_k < V ? static_cast<int>(c.top_k) : 0});
    std::vector<float> rows = c.logits;
    rows.insert(rows.end(), c.logits.begin(), c.logits.end());  // k = 1: one draft row, one bonus row
    std::vector<float> q(c.q.begin(), c.q.end());
    const nc::logits_matrix<float> target{rows.data(), 2, V, V};
    std::vector<std::uint64_t> counts(V);
    std::uint64_t accepted = 0;
    std::vector<nc::row_result> out(2);
    for (std::uint64_t t = 0; t < trials; ++t) {
      const std::int32_t x = draw(c.q, g);
      const nc::verify_result r =
          verifier.verify(s, target, std::span<const std::int32_t>(&x, 1),
                          c.with_probs ? std::span<const float>(q) : std::span<const float>(), ws,
                          nc::row_request{{}, {}, {}, t, nullptr, 0}, out);
      REQUIRE(r.status == nc::status::ok);
      ++counts[static_cast<std::size_t>(out[0].token)];
      accepted += r.accepted;
    }
    const std::vector<double> p = target_p(c.logits, c.top_k);
    const auto chi = nucleus_ref::chi_square(counts, p);
    double alpha = 0;  // closed form of the acceptance rate: sum_x min(p(x), q(x)) (q one-hot: sum q p)
    for (std::size_t i = 0; i < V; ++i) alpha += c.with_probs ? std::min(p[i], c.q[i]) : c.q[i] * p[i];
    const double rate = static_cast<double>(accepted) / trials;
    INFO(c.name << ": chi2 " << chi.statistic << " (df " << chi.df << ", critical " << chi.critical
                << "), acceptance " << rate << " vs " << alpha);
    CHECK(chi.pass());
    CHECK(std::fabs(rate - alpha) <= 6.0 * std::sqrt(alpha * (1 - alpha) / trials) + 1e-12);
  }
}

// The harness above must be able to fail: two verifiers with a deliberate error, written here in double
// (accept x ~ q with probability min(1, p/q), else draw from the residual max(p - q, 0)), run through
// the same trials and the same chi-square. Each must be rejected wherever its error moves the emitted
// distribution by more than 0.01 in total variation.
TEST_CASE("verify_draft: the chi-square rejects verifiers with a deliberate error", "[engine][speculative]") {
  enum class fault { residual_without_clamp, acceptance_swapped };
  auto emitted = [](fault f, const std::vector<double>& p, const std::vector<double>& q) {
    // The faulty verifier's exact output distribution, for choosing the cases it must fail.
    std::vector<double> a(V), r(V), out(V);
    double reject = 0, rz = 0;
    for (std::size_t i = 0; i < V; ++i) {
      const double ratio =
          f == fault::acceptance_swapped ? (p[i] > 0 ? q[i] / p[i] : 1.0) : (q[i] > 0 ? p[i] / q[i] : 1.0);
      a[i] = std::min(1.0, ratio);
      reject += q[i] * (1 - a[i]);
      r[i] = f == fault::residual_without_clamp ? std::fabs(p[i] - q[i]) : std::max(p[i] - q[i], 0.0);
      rz += r[i];
    }
    for (std::size_t i = 0; i < V; ++i) out[i] = q[i] * a[i] + (rz > 0 ? reject * r[i] / rz : 0.0);
    return out;
  };
  constexpr std::uint64_t trials = 1'000'000;
  std::mt19937_64 g(77);
  int must_fail = 0, rejected = 0;
  for (fault f : {fault::residual_without_clamp, fault::acceptance_swapped}) {
    for (const exactness_case& c : exactness_cases()) {
      if (!c.with_probs) continue;
      const std::vector<double> p = target_p(c.logits, c.top_k);
      const std::vector<double> want = emitted(f, p, c.q);
      double tv = 0;
      for (std::size_t i = 0; i < V; ++i) tv += 0.5 * std::fabs(want[i] - p[i]);
      if (tv <= 0.01) continue;
      ++must_fail;
      std::vector<std::uint64_t> counts(V);
      for (std::uint64_t t = 0; t < trials; ++t) {
        const std::int32_t x = draw(c.q, g);
        const auto xi = static_cast<std::size_t>(x);
        const double ratio = f == fault::acceptance_swapped ? (p[xi] > 0 ? c.q[xi] / p[xi] : 1.0)
                                                            : (c.q[xi] > 0 ? p[xi] / c.q[xi] : 1.0);
        const bool accept = std::uniform_real_distribution<double>(0.0, 1.0)(g) < std::min(1.0, ratio);
        std::vector<double> r(V);
        for (std::size_t i = 0; i < V; ++i)
          r[i] = f == fault::residual_without_clamp ? std::fabs(p[i] - c.q[i]) : std::max(p[i] - c.q[i], 0.0);
        double rz = 0;
        for (double w : r) rz += w;
        for (double& w : r) w /= rz;
        ++counts[accept ? xi : static_cast<std::size_t>(draw(r, g))];
      }
      const auto chi = nucleus_ref::chi_square(counts, p);
      INFO(c.name << " (fault " << static_cast<int>(f) << ", TV " << tv << "): chi2 " << chi.statistic
                  << " critical " << chi.critical);
      CHECK_FALSE(chi.pass());
      rejected += chi.pass() ? 0 : 1;
    }
  }
  CHECK(must_fail >= 4);  // each fault moves several of the drafts
  CHECK(rejected == must_fail);
}

TEST_CASE("verify_draft: the acceptance count follows its closed form; later tokens follow their rows",
          "[engine][speculative]") {
  // k = 3 positions with different targets and drafts; no processor reads the history, so position i
  // accepts with probability a_i = sum_x min(p_i, q_i) independently: P(accepted = j) =
  // a_0 ... a_{j-1} (1 - a_j), and P(3) = a_0 a_1 a_2. Given that position 0 stood, the token emitted
  // at position 1 follows p_1.
  const std::vector<std::vector<float>> logits = {{3.0f, 2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -2.0f, -3.0f},
                                                  {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f, 0.8f},
                                                  {1.0f, -1.0f, 1.5f, -1.5f, 2.0f, -2.0f, 0.0f, 0.2f},
                                                  {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}};
  std::vector<std::vector<double>> q = {{0.4, 0.1, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05},
                                        {0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125, 0.125},
                                        {0.0, 0.5, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0}};
  std::vector<float> rows, qrows;
  for (const auto& l : logits) rows.insert(rows.end(), l.begin(), l.end());
  for (const auto& r : q) qrows.insert(qrows.end(), r.begin(), r.end());
  double a[3];
  for (int i = 0; i < 3; ++i) {
    const auto p = target_p(logits[static_cast<std::size_t>(i)]);
    a[i] = 0;
    for (std::size_t x = 0; x < V; ++x) a[i] += std::min(p[x], q[static_cast<std::size_t>(i)][x]);
  }
  const std::vector<double> expect = {1 - a[0], a[0] * (1 - a[1]), a[0] * a[1] * (1 - a[2]),
                                      a[0] * a[1] * a[2]};
  constexpr std::uint64_t trials = 1'000'000;
  const nc::sampler s(nc::sampling_params{.seed = 5});
  nc::draft_verifier verifier;
  nc::workspace ws;
  std::mt19937_64 g(7);
  std::vector<std::uint64_t> by_count(4), second(V);
  std::vector<nc::row_result> out(4);
  for (std::uint64_t t = 0; t < trials; ++t) {
    const std::int32_t draft[3] = {draw(q[0], g), draw(q[1], g), draw(q[2], g)};
    const nc::verify_result r =
        verifier.verify(s, nc::logits_matrix<float>{rows.data(), 4, V, V}, draft, qrows, ws,
                        nc::row_request{{}, {}, {}, 4 * t, nullptr, 0}, out);
    REQUIRE(r.status == nc::status::ok);
    REQUIRE(r.emitted == r.accepted + 1);
    ++by_count[r.accepted];
    if (r.accepted >= 1) ++second[static_cast<std::size_t>(out[1].token)];
  }
  const auto chi = nucleus_ref::chi_square(by_count, expect);
  INFO("acceptance counts: chi2 " << chi.statistic << " critical " << chi.critical);
  CHECK(chi.pass());
  const auto chi2 = nucleus_ref::chi_square(second, target_p(logits[1]));
  INFO("second token given the first stood: chi2 " << chi2.statistic << " critical " << chi2.critical);
  CHECK(chi2.pass());
}

TEST_CASE("verify_draft: greedy keeps the draft while it is the argmax", "[engine][speculative]") {
  // Row argmaxes: 2, 5, 1, then the bonus row's 7.
  std::vector<float> rows(4 * V, 0.0f);
  rows[0 * V + 2] = rows[1 * V + 5] = rows[2 * V + 1] = rows[3 * V + 7] = 4.0f;
  const nc::logits_matrix<float> target{rows.data(), 4, V, V};
  const nc::sampler greedy(nc::sampling_params{.temperature = 0.0f, .seed = 1});
  nc::draft_verifier verifier;
  nc::workspace ws;
  std::vector<nc::row_result> out(4);
  const std::int32_t all[3] = {2, 5, 1}, miss[3] = {2, 4, 1};
  for (std::uint64_t seed = 0; seed < 20; ++seed) {  // no randomness: any position gives the same
    const nc::row_request rq{{}, {}, {}, seed * 100, nullptr, 0};
    CHECK(verifier.verify(greedy, target, all, {}, ws, rq, out) == nc::verify_result{3, 4, nc::status::ok});
    CHECK((out[0].token == 2 && out[1].token == 5 && out[2].token == 1 && out[3].token == 7));
    CHECK(verifier.verify(greedy, target, miss, {}, ws, rq, out) == nc::verify_result{1, 2, nc::status::ok});
    CHECK((out[0].token == 2 && out[1].token == 5));
  }
}

TEST_CASE("verify_draft: bad input has its documented answer", "[engine][speculative]") {
  const nc::sampler s(nc::sampling_params{.seed = 3});
  nc::draft_verifier verifier;
  nc::workspace ws;
  std::vector<nc::row_result> out(3);
  std::vector<float> rows(3 * V, 0.0f);
  const nc::logits_matrix<float> target{rows.data(), 3, V, V};
  const nc::row_request rq{{}, {}, {}, 0, nullptr, 0};
  const std::int32_t outside[2] = {1, 8}, negative[2] = {-1, 0}, fine[2] = {1, 2};
  CHECK(verifier.verify(s, target, outside, {}, ws, rq, out) ==
        nc::verify_result{0, 0, nc::status::invalid_input});
  CHECK(verifier.verify(s, target, negative, {}, ws, rq, out) ==
        nc::verify_result{0, 0, nc::status::invalid_input});
  // A row that cannot be sampled ends verification there; what stood before it stands.
  std::vector<float> nan_rows = rows;
  for (std::size_t i = V; i < 2 * V; ++i) nan_rows[i] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> q(2 * V, 0.0f);
  q[1] = 1.0f;  // the draft is certain of token 1 at position 0: p(1) = 1/8 > u * 0 fails only by u
  q[V + 2] = 1.0f;
  nc::verify_result r{};
  for (std::uint64_t pos = 0; pos < 64 && r.accepted == 0; ++pos)
    r = verifier.verify(s, nc::logits_matrix<float>{nan_rows.data(), 3, V, V}, fine, q, ws,
                        nc::row_request{{}, {}, {}, pos, nullptr, 0}, out);
  CHECK(r == nc::verify_result{1, 1, nc::status::no_candidates});
  // A draft probability that is not a probability.
  std::vector<float> bad_q = q;
  bad_q[1] = std::numeric_limits<float>::quiet_NaN();
  CHECK(verifier.verify(s, target, fine, bad_q, ws, rq, out).status == nc::status::invalid_input);
  // q(x) = 0 where p(x) > 0: u * 0 < p(x), always accepted.
  std::vector<float> zero_q(2 * V, 1.0f / (V - 1));
  zero_q[1] = 0.0f;
  zero_q[V + 2] = 0.0f;
  for (std::uint64_t pos = 0; pos < 50; ++pos)
    CHECK(verifier.verify(s, target, fine, zero_q, ws, nc::row_request{{}, {}, {}, pos, nullptr, 0}, out)
              .accepted == 2);
  // No positive residual mass: a top-1 target on token 0, a draft certain of token 0 that proposes
  // token 1 (q(1) = 0 = p(1): rejected); max(p - q, 0) is 0 everywhere, so the token comes from p.
  const nc::sampler top1(nc::sampling_params{.top_k = 1, .seed = 3});
  std::vector<float> peaked = rows;
  peaked[0] = peaked[V] = peaked[2 * V] = 1.0f;
  std::vector<float> q0(2 * V, 0.0f);
  q0[0] = q0[V] = 1.0f;
  const std::int32_t one[2] = {1, 1};
  CHECK(verifier.verify(top1, nc::logits_matrix<float>{peaked.data(), 3, V, V}, one, q0, ws, rq, out) ==
        nc::verify_result{0, 1, nc::status::ok});
  CHECK(out[0].token == 0);
  // Shapes that disagree throw before anything is read; mirostat is refused (its mu moves per draw).
  CHECK_THROWS_AS(verifier.verify(s, nc::logits_matrix<float>{rows.data(), 2, V, V}, fine, {}, ws, rq, out),
                  std::invalid_argument);
  CHECK_THROWS_AS(verifier.verify(s, target, fine, std::span<const float>(q.data(), V), ws, rq, out),
                  std::invalid_argument);
  CHECK_THROWS_AS(verifier.verify(s, target, fine, {}, ws, rq, std::span<nc::row_result>(out.data(), 2)),
                  std::invalid_argument);
  CHECK_THROWS_AS(
      verifier.verify(s, nc::logits_matrix<float>{rows.data(), 3, V, V - 1}, fine, {}, ws, rq, out),
      std::invalid_argument);  // overlapping rows
  CHECK_THROWS_AS(verifier.verify(s, nc::logits_matrix<float>{nullptr, 1, V, V}, {}, {}, ws, rq, out),
                  std::invalid_argument);  // k = 0 reads its one row too
  // A bonus row that cannot be sampled: out[k] is the sampler's own result, status and all.
  std::vector<float> nan_bonus = rows;
  for (std::size_t i = 2 * V; i < 3 * V; ++i) nan_bonus[i] = std::numeric_limits<float>::quiet_NaN();
  out.assign(3, nc::row_result{7, 1.0f, 3, 0, nc::status::ok});
  const nc::verify_result nb =
      verifier.verify(s, nc::logits_matrix<float>{nan_bonus.data(), 3, V, V}, fine, zero_q, ws, rq, out);
  CHECK(nb == nc::verify_result{2, 2, nc::status::no_candidates});
  CHECK(out[2] == s.sample(std::span<const float>(nan_bonus.data() + 2 * V, V), ws,
                           nc::row_request{{}, fine, {}, 2, nullptr, 0}));
  CHECK(out[2].status == nc::status::no_candidates);
  float mu = 10.0f;
  const nc::sampler miro(nc::sampling_params{.mirostat = 2, .seed = 1});
  CHECK(verifier.verify(miro, target, fine, {}, ws, nc::row_request{{}, {}, {}, 0, &mu, 0}, out).status ==
        nc::status::invalid_input);
  CHECK(mu == 10.0f);
  // With no draft there is one draw, a plain one: mirostat is served, and moves mu as a plain draw.
  float mu_plain = 10.0f;
  const nc::row_result plain = miro.sample(target.row(0), ws, nc::row_request{{}, {}, {}, 0, &mu_plain, 0});
  REQUIRE(plain.status == nc::status::ok);
  CHECK(verifier.verify(miro, nc::logits_matrix<float>{rows.data(), 1, V, V}, {}, {}, ws,
                        nc::row_request{{}, {}, {}, 0, &mu, 0},
                        out) == nc::verify_result{0, 1, nc::status::ok});
  CHECK(out[0] == plain);
  CHECK(mu == mu_plain);
  CHECK(mu != 10.0f);
}

TEST_CASE("verify_draft: no draft is a plain draw; batches give the single call's bits",
          "[engine][speculative]") {
  std::mt19937 g(11);
  std::normal_distribution<float> n(0.0f, 2.0f);
  constexpr std::size_t W = 3000;  // a wider vocabulary: the kernels' SIMD paths
  const nc::sampler s(
      nc::sampling_params{.temperature = 0.8f, .top_p = 0.9f, .repetition_penalty = 1.3f, .seed = 9});
  const nc::sampler k40(nc::sampling_params{.top_k = 40, .seed = 4});
  const nc::sampler top5(nc::sampling_params{.temperature = 0.9f, .seed = 2, .logprobs = 5});
  nc::draft_verifier verifier;
  nc::workspace ws;
  const std::vector<std::int32_t> history = {5, 9, 5, 100};
  // k = 0: the bonus row alone is the sampler's own draw: its row_result and top-n, bit for bit.
  for (std::uint64_t pos = 0; pos < 30; ++pos) {
    std::vector<float> row(W);
    for (float& x : row) x = n(g);
    const nc::sampler& smp = pos % 2 ? top5 : s;
    std::vector<nc::row_result> out(1);
    std::vector<nc::token_logprob> top(8), plain_top(8);
    const nc::row_request rq{{}, history, {}, pos, nullptr, 2};
    const nc::verify_result r =
        verifier.verify(smp, nc::logits_matrix<float>{row.data(), 1, W, W}, {}, {}, ws, rq, out, top);
    const nc::row_result plain = smp.sample<float>(row, ws, rq, plain_top);
    CHECK(r == nc::verify_result{0, 1, nc::status::ok});
    CHECK(out[0] == plain);
    CHECK(top == plain_top);
    CHECK(plain.top_count == (pos % 2 ? 5u : 0u));
  }
  // 24 requests with k = 0 … 5 and drafts of both kinds, verified alone, then as one batch on pools
  // of 1, 2 and 3 threads and in reverse order: the same results, bit for bit.
  struct job {
    std::vector<float> rows, q;
    std::vector<std::int32_t> draft;
    std::vector<nc::row_result> out;
    const nc::sampler* smp;
  };
  std::vector<job> jobs(24);
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const std::size_t k = j % 6;
    jobs[j].rows.resize((k + 1) * W);
    for (float& x : jobs[j].rows) x = n(g);
    for (std::size_t i = 0; i < k; ++i) {
      // Draft tokens near the top of each row, so some stand.
      const auto top = std::max_element(jobs[j].rows.begin() + static_cast<std::ptrdiff_t>(i * W),
                                        jobs[j].rows.begin() + static_cast<std::ptrdiff_t>((i + 1) * W));
      jobs[j].draft.push_back(
          static_cast<std::int32_t>(top - jobs[j].rows.begin() - static_cast<std::ptrdiff_t>(i * W)));
    }
    if (j % 2 == 0 && k > 0) {
      jobs[j].q.assign(k * W, 0.5f / W);
      for (std::size_t i = 0; i < k; ++i)
        jobs[j].q[i * W + static_cast<std::size_t>(jobs[j].draft[i])] += 0.5f;
    }
    jobs[j].smp = j % 3 == 0 ? &k40 : &s;
  }
  auto rows_of = [&](bool reverse) {
    std::vector<nc::verify_row<float>> rows;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      job& jb = jobs[reverse ? jobs.size() - 1 - i : i];
      jb.out.assign(jb.draft.size() + 1, nc::row_result{});
      rows.push_back({jb.smp, nc::row_request{{}, history, {}, 1000, nullptr, 1},
                      nc::logits_matrix<float>{jb.rows.data(), jb.draft.size() + 1, W, W}, jb.draft, jb.q,
                      jb.out});
    }
    return rows;
  };
  std::vector<nc::verify_result> alone(jobs.size());
  std::vector<std::vector<nc::row_result>> alone_out(jobs.size());
  std::size_t stood = 0;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    jobs[j].out.assign(jobs[j].draft.size() + 1, nc::row_result{});
    alone[j] = verifier.verify(
        *jobs[j].smp, nc::logits_matrix<float>{jobs[j].rows.data(), jobs[j].draft.size() + 1, W, W},
        jobs[j].draft, jobs[j].q, ws, nc::row_request{{}, history, {}, 1000, nullptr, 1}, jobs[j].out);
    alone_out[j] = jobs[j].out;
    stood += alone[j].accepted;
  }
  CHECK(stood > 0);
  nc::batch_verifier batch;
  for (std::size_t threads : {1, 2, 3}) {
    nc::thread_pool pool(threads);
    for (bool reverse : {false, true}) {
      const auto rows = rows_of(reverse);
      std::vector<nc::verify_result> res(rows.size());
      batch.verify<float>(rows, res, pool);
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::size_t j = reverse ? jobs.size() - 1 - i : i;
        INFO("threads " << threads << " reverse " << reverse << " request " << j);
        CHECK(res[i] == alone[j]);
        CHECK(jobs[j].out == alone_out[j]);
      }
    }
  }
}
