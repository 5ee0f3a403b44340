// The batch sampler: a row's result depends only on that row's logits, sampler and request; it is
// the same for any thread count, batch composition, row order and row stride, and equals the
// single-row sampler. Mixed knobs, processors and dtypes in one batch; speculative verification
// rows beside plain rows in one call, each equal to the single verification or draw.
#include <catch2/catch.hpp>

#include <limits>
#include <nucleus/engine.hpp>
#include <numeric>

#include "reference/reference.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

namespace {

struct request {
  nc::sampler sampler;
  std::vector<std::int32_t> prompt, output;
  std::vector<std::uint32_t> mask;
  std::uint64_t position;
};

std::vector<request> make_requests(std::size_t n, std::size_t V, ref::rng& g) {
  std::vector<request> out;
  for (std::size_t i = 0; i < n; ++i) {
    nc::sampling_params p;
    p.temperature = i % 5 == 0 ? 0.0f : static_cast<float>(g.uniform(0.3, 1.5));
    p.top_k = static_cast<int>(g.below(3) == 0 ? 0 : g.below(100));
    p.top_p = g.below(2) ? 1.0f : static_cast<float>(g.uniform(0.5, 0.99));
    p.min_p = g.below(3) == 0 ? 0.05f : 0.0f;
    p.repetition_penalty = g.below(2) ? 1.0f : 1.3f;
    p.seed = g.next();
    p.logprobs = static_cast<int>(g.below(10)) - 1;
    p.logprobs_mode = g.below(2) ? nc::logprob_mode::raw : nc::logprob_mode::processed;
    const auto order = static_cast<nc::engine_order>(g.below(4));
    if (order != nc::engine_order::hf) p.frequency_penalty = g.below(2) ? 0.0f : 0.4f;
    // The samplers only some engines have, where the order has them (else the preset rejects them).
    const bool llama_like = order == nc::engine_order::nucleus || order == nc::engine_order::llama_cpp;
    const bool hf_like = order == nc::engine_order::nucleus || order == nc::engine_order::hf;
    if (order != nc::engine_order::vllm && g.below(3) == 0) p.typical_p = 0.9f;
    if (llama_like && g.below(3) == 0) p.top_n_sigma = 1.5f;
    if (llama_like && g.below(3) == 0) p.xtc_probability = 0.5f;
    if (llama_like && g.below(3) == 0) p.dynatemp_range = 0.3f;
    if (llama_like && g.below(3) == 0) p.dry_multiplier = 0.8f;
    if (hf_like && g.below(3) == 0) p.epsilon_cutoff = 3e-4f;
    if (hf_like && g.below(3) == 0) p.eta_cutoff = 1e-3f;
    if (hf_like && g.below(3) == 0) p.no_repeat_ngram_size = 2;
    if (g.below(4) == 0) p.logit_bias = {{static_cast<std::int32_t>(g.below(V)), 5.0f}};
    request r{nc::sampler(p, order), {}, {}, {}, g.below(1000)};
    for (std::size_t t = 0; t < 20; ++t) r.prompt.push_back(static_cast<std::int32_t>(g.below(V)));
    for (std::size_t t = 0; t < g.below(30); ++t) r.output.push_back(static_cast<std::int32_t>(g.below(V)));
    if (g.below(3) == 0) {
      r.mask.assign((V + 31) / 32, 0u);
      for (auto& w : r.mask) w = static_cast<std::uint32_t>(g.next());
    }
    out.push_back(std::move(r));
  }
  return out;
}

nc::batch_row row_of(const request& r) {
  return {&r.sampler, {r.prompt, r.output, r.mask, r.position}};
}

struct outcome {
  nc::row_result result;
  std::vector<nc::token_logprob> top;
  bool operator==(const outcome&) const = default;
};

// Samples `order` (indices into reqs / rows) as one batch with the given executor and stride.
template <class T, class E>
std::vector<outcome> run_batch(const std::vector<request>& reqs, const std::vector<std::vector<T>>& rows,
                               const std::vector<std::size_t>& order, std::size_t stride, E&& ex,
                               nc::batch_sampler& bs) {
  const std::size_t V = rows.front().size();
  std::vector<T> matrix(order.size() * stride);
  std::vector<nc::batch_row> br;
  for (std::size_t i = 0; i < order.size(); ++i) {
    std::copy(rows[order[i]].begin(), rows[order[i]].end(),
              matrix.begin() + static_cast<std::ptrdiff_t>(i * stride));
    br.push_back(row_of(reqs[order[i]]));
  }
  std::vector<nc::row_result> res(order.size());
  std::vector<nc::token_logprob> top(order.size() * nc::max_logprobs);
  bs.sample(nc::logits_matrix<T>{matrix.data(), order.size(), V, stride}, br, res, ex, top, nc::max_logprobs);
  std::vector<outcome> out(reqs.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    auto first = top.begin() + static_cast<std::ptrdiff_t>(i * nc::max_logprobs);
    out[order[i]] = {res[i], {first, first + res[i].top_count}};
  }
  return out;
}

template <class T>
std::vector<std::vector<T>> make_rows(std::size_t n, std::size_t V, ref::rng& g) {
  std::vector<std::vector<T>> rows;
  for (std::size_t i = 0; i < n; ++i) {
    const auto f = ref::make_row(ref::all_row_kinds[i % std::size(ref::all_row_kinds)], V, g);
    std::vector<T> r(V);
    for (std::size_t j = 0; j < V; ++j) {
      if constexpr (std::is_same_v<T, float>)
        r[j] = f[j];
      else
        r[j] = nc::to_bf16(f[j]);
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

template <class T>
void invariance(std::size_t V) {
  ref::rng g(V * 31 + sizeof(T));
  const std::size_t B = 24;
  const auto reqs = make_requests(B, V, g);
  const auto rows = make_rows<T>(B, V, g);

  // The single-row sampler is the truth.
  std::vector<outcome> alone(B);
  nc::workspace ws;
  for (std::size_t i = 0; i < B; ++i) {
    std::vector<nc::token_logprob> top(nc::max_logprobs);
    const auto& r = reqs[i];
    const nc::row_result res =
        r.sampler.sample(std::span<const T>(rows[i]), ws, {r.prompt, r.output, r.mask, r.position}, top);
    alone[i] = {res, {top.begin(), top.begin() + res.top_count}};
  }
  std::size_t ok = 0;
  for (const auto& o : alone) ok += o.result.status == nc::status::ok;
  CHECK(ok >= B / 2);  // the test must exercise real draws, not only failures

  std::vector<std::size_t> order(B);
  std::iota(order.begin(), order.end(), 0);
  nc::batch_sampler bs;
  CHECK(run_batch(reqs, rows, order, V, nc::inline_executor{}, bs) == alone);
  nc::thread_pool two(2), three(3);
  CHECK(run_batch(reqs, rows, order, V + 17, two, bs) == alone);  // padded stride
  std::reverse(order.begin(), order.end());
  CHECK(run_batch(reqs, rows, order, V, three, bs) == alone);
  for (std::size_t i = B - 1; i > 0; --i) std::swap(order[i], order[g.below(i + 1)]);
  CHECK(run_batch(reqs, rows, order, V + 64, two, bs) == alone);
  // Any sub-batch gives the same rows.
  for (std::size_t start = 0; start < B; start += 5) {
    std::vector<std::size_t> sub;
    for (std::size_t i = start; i < B; i += 2) sub.push_back(i);
    const auto got = run_batch(reqs, rows, sub, V, two, bs);
    for (std::size_t i : sub) CHECK(got[i] == alone[i]);
  }
}

// A mixed batch: request j has a draft of k = j % 4 tokens (k = 0: a plain row with top-n
// logprobs), with or without draft probabilities; its k + 1 target rows are consecutive.
struct draft_request {
  std::size_t first_row = 0;  // into the rows of make_rows
  std::vector<std::int32_t> draft;
  std::vector<float> q;
};

struct verify_outcome {
  nc::verify_result result;
  std::vector<nc::row_result> out;
  std::vector<nc::token_logprob> top;
  bool operator==(const verify_outcome&) const = default;
};

const nc::row_result unwritten{-7, 7.0f, 7, 7, nc::status::ok};

template <class T>
std::vector<draft_request> make_drafts(std::size_t n, const std::vector<std::vector<T>>& rows, ref::rng& g) {
  std::vector<draft_request> out(n);
  std::size_t next = 0;
  for (std::size_t j = 0; j < n; ++j) {
    const std::size_t k = j % 4, V = rows.front().size();
    out[j].first_row = next;
    for (std::size_t i = 0; i < k; ++i) {
      // Mostly each row's largest logit, so drafts stand; every third request proposes at random.
      std::size_t best = 0;
      for (std::size_t t = 1; t < V; ++t)
        if (nc::to_float(rows[next + i][t]) > nc::to_float(rows[next + i][best])) best = t;
      out[j].draft.push_back(static_cast<std::int32_t>(j % 3 == 2 ? g.below(V) : best));
    }
    if (j % 2 == 1 && k > 0) {
      out[j].q.assign(k * V, 0.5f / static_cast<float>(V));
      for (std::size_t i = 0; i < k; ++i) out[j].q[i * V + static_cast<std::size_t>(out[j].draft[i])] += 0.5f;
    }
    next += k + 1;
  }
  return out;
}

// Verifies `order` (indices into reqs / drafts) as one batch: the requests' rows are copied, in that
// order, into one matrix of the given stride, as a target model would write them.
template <class T, class E>
std::vector<verify_outcome> run_verify_batch(const std::vector<request>& reqs,
                                             const std::vector<draft_request>& drafts,
                                             const std::vector<std::vector<T>>& rows,
                                             const std::vector<std::size_t>& order, std::size_t stride,
                                             E&& ex, nc::batch_sampler& bs) {
  const std::size_t V = rows.front().size();
  std::size_t total = 0;
  for (std::size_t j : order) total += drafts[j].draft.size() + 1;
  std::vector<T> matrix(total * stride);
  std::vector<verify_outcome> got(reqs.size());
  std::vector<nc::verify_row<T>> vr;
  std::size_t at = 0;
  for (std::size_t j : order) {
    const draft_request& d = drafts[j];
    const std::size_t k = d.draft.size();
    for (std::size_t i = 0; i <= k; ++i)
      std::copy(rows[d.first_row + i].begin(), rows[d.first_row + i].end(),
                matrix.begin() + static_cast<std::ptrdiff_t>((at + i) * stride));
    got[j].out.assign(k + 1, unwritten);
    got[j].top.assign(nc::max_logprobs, nc::token_logprob{});
    const request& r = reqs[j];
    vr.push_back({&r.sampler,
                  {r.prompt, r.output, r.mask, r.position},
                  nc::logits_matrix<T>{matrix.data() + at * stride, k + 1, V, stride},
                  d.draft,
                  d.q,
                  got[j].out,
                  got[j].top});
    at += k + 1;
  }
  std::vector<nc::verify_result> res(order.size(), nc::verify_result{9, 9, nc::status::ok});
  bs.sample<T>(vr, res, ex);
  for (std::size_t i = 0; i < order.size(); ++i) got[order[i]].result = res[i];
  return got;
}

template <class T>
void mixed_invariance(std::size_t V) {
  ref::rng g(V * 7 + sizeof(T));
  const std::size_t B = 24;
  const auto reqs = make_requests(B, V, g);
  std::size_t total = 0;
  for (std::size_t j = 0; j < B; ++j) total += j % 4 + 1;
  auto rows = make_rows<T>(total, V, g);
  // Request 4's plain row and request 5's first draft row have no candidates.
  constexpr float ninf = -std::numeric_limits<float>::infinity();
  for (std::size_t r : {10u, 11u})  // request j's rows start at the sum of (i % 4 + 1), i < j
    for (T& x : rows[r]) {
      if constexpr (std::is_same_v<T, float>)
        x = ninf;
      else
        x = nc::to_bf16(ninf);
    }
  const auto drafts = make_drafts(B, rows, g);

  // The truth: sampler::sample alone for a plain row, draft_verifier::verify alone for a draft.
  std::vector<verify_outcome> alone(B);
  nc::workspace ws;
  nc::draft_verifier verifier;
  std::size_t plain_top = 0, stood = 0, rejected = 0, failed = 0;
  for (std::size_t j = 0; j < B; ++j) {
    const request& r = reqs[j];
    const draft_request& d = drafts[j];
    const std::size_t k = d.draft.size();
    const nc::row_request rq{r.prompt, r.output, r.mask, r.position};
    verify_outcome& a = alone[j];
    a.out.assign(k + 1, unwritten);
    a.top.assign(nc::max_logprobs, nc::token_logprob{});
    if (k == 0) {
      a.out[0] = r.sampler.sample(std::span<const T>(rows[d.first_row]), ws, rq, a.top);
      const bool ok = a.out[0].status == nc::status::ok;
      a.result = {0, ok ? 1u : 0u, a.out[0].status};
      plain_top += ok && a.out[0].top_count > 0;
      failed += !ok;
    } else {
      std::vector<T> target;
      for (std::size_t i = 0; i <= k; ++i)
        target.insert(target.end(), rows[d.first_row + i].begin(), rows[d.first_row + i].end());
      a.result = verifier.verify(r.sampler, nc::logits_matrix<T>{target.data(), k + 1, V, V}, d.draft, d.q,
                                 ws, rq, a.out, a.top);
      stood += a.result.accepted;
      rejected += a.result.status == nc::status::ok && a.result.accepted < k;
      failed += a.result.status != nc::status::ok;
    }
  }
  // The test must exercise plain draws with top-n, drafts that stand, rejections and failures.
  CHECK(plain_top > 0);
  CHECK(stood > 0);
  CHECK(rejected > 0);
  CHECK(failed > 0);

  std::vector<std::size_t> order(B);
  std::iota(order.begin(), order.end(), 0);
  nc::batch_sampler bs;
  CHECK(run_verify_batch(reqs, drafts, rows, order, V, nc::inline_executor{}, bs) == alone);
  for (std::size_t threads : {1u, 2u, 3u}) {
    nc::thread_pool pool(threads);
    for (bool reverse : {false, true}) {
      std::vector<std::size_t> o = order;
      if (reverse) std::reverse(o.begin(), o.end());
      INFO("threads " << threads << " reverse " << reverse);
      CHECK(run_verify_batch(reqs, drafts, rows, o, V + 17 * threads, pool, bs) == alone);
    }
  }
  // A shuffled sub-batch, and the plain-row call between verification calls on the same sampler.
  std::vector<std::size_t> sub;
  for (std::size_t j = 1; j < B; j += 3) sub.push_back(j);
  for (std::size_t i = sub.size() - 1; i > 0; --i) std::swap(sub[i], sub[g.below(i + 1)]);
  nc::thread_pool two(2);
  (void)run_batch(reqs, make_rows<T>(B, V, g), order, V, two, bs);
  const auto got = run_verify_batch(reqs, drafts, rows, sub, V + 64, two, bs);
  for (std::size_t j : sub) CHECK(got[j] == alone[j]);
}

}  // namespace

TEST_CASE("batch: results do not depend on threads, order, stride or batch composition", "[batch]") {
  invariance<float>(1000);
  invariance<float>(32000);
  invariance<nc::bf16>(32000);
  invariance<float>(151936);
}

TEST_CASE("batch: shape errors throw before any row is sampled", "[batch]") {
  nc::sampling_params p;
  const nc::sampler s(p);
  std::vector<float> m(2 * 10, 0.0f);
  std::vector<nc::batch_row> rows(2, nc::batch_row{&s, {}});
  std::vector<nc::row_result> out(2, nc::row_result{7, 1.0f, 3, 0, nc::status::ok});
  nc::batch_sampler bs;
  const nc::logits_matrix<float> good{m.data(), 2, 10, 10};
  CHECK_THROWS_AS(bs.sample(nc::logits_matrix<float>{m.data(), 2, 10, 9}, rows, out), std::invalid_argument);
  CHECK_THROWS_AS(bs.sample(good, std::span(rows).first(1), out), std::invalid_argument);
  CHECK_THROWS_AS(bs.sample(good, rows, std::span(out).first(1)), std::invalid_argument);
  std::vector<nc::token_logprob> top(3);
  CHECK_THROWS_AS(bs.sample(good, rows, out, nc::inline_executor{}, top, 2), std::invalid_argument);
  rows[1].sampler = nullptr;
  CHECK_THROWS_AS(bs.sample(good, rows, out), std::invalid_argument);
  CHECK(out[0] == nc::row_result{7, 1.0f, 3, 0, nc::status::ok});  // untouched
  rows[1].sampler = &s;
  bs.sample(good, rows, out);
  CHECK(out[0].status == nc::status::ok);
  CHECK(out[0].token >= 0);
}

TEST_CASE("batch: verification rows beside plain rows give the single calls' bits", "[batch][speculative]") {
  mixed_invariance<float>(1000);
  mixed_invariance<float>(32000);
  mixed_invariance<nc::bf16>(32000);
}

TEST_CASE("batch: a verification batch's shape errors throw, naming the row, before any row is touched",
          "[batch][speculative]") {
  constexpr std::size_t V = 10;
  const nc::sampler s(nc::sampling_params{.seed = 1});
  std::vector<float> m(4 * V, 0.0f);
  m[3] = 2.0f;
  const std::int32_t draft[2] = {3, 3};
  const std::vector<float> q(2 * V, 0.1f);
  std::vector<nc::row_result> out0(1, unwritten), out1(3, unwritten);
  std::vector<nc::verify_row<float>> rows = {
      {&s, {}, nc::logits_matrix<float>{m.data(), 1, V, V}, {}, {}, out0},
      {&s, {}, nc::logits_matrix<float>{m.data() + V, 3, V, V}, draft, q, out1},
  };
  std::vector<nc::verify_result> res(2, nc::verify_result{9, 9, nc::status::ok});
  nc::batch_sampler bs;
  nc::thread_pool pool(2);
  auto fails_with = [&](const std::vector<nc::verify_row<float>>& rs, const char* what) {
    INFO(what);
    CHECK_THROWS_WITH(bs.sample<float>(rs, res, pool), Catch::Contains(what));
    CHECK(out0[0] == unwritten);  // the good row before the bad one is untouched
    CHECK(out1[0] == unwritten);
    CHECK(res[0] == nc::verify_result{9, 9, nc::status::ok});
  };
  CHECK_THROWS_WITH(bs.sample<float>(rows, std::span(res).first(1), pool),
                    Catch::Contains("results.size() must equal rows.size()"));
  auto bad = rows;
  bad[1].sampler = nullptr;
  fails_with(bad, "row 1: no sampler");
  bad = rows;
  bad[1].target.rows = 2;
  fails_with(bad, "row 1: target must hold draft.size() + 1 rows");
  bad = rows;
  bad[1].out = std::span(out1).first(2);
  fails_with(bad, "row 1: out must hold draft.size() + 1 entries");
  bad = rows;
  bad[1].draft_probs = std::span(q).first(V);
  fails_with(bad, "row 1: draft_probs must be empty or hold k * V");
  bad = rows;
  bad[1].target.stride = V - 1;
  fails_with(bad, "row 1: target.stride must be >= target.vocab");
  bad = rows;
  bad[1].target.data = nullptr;
  fails_with(bad, "row 1: target.data is null");
  // A bad token is that row's status, as in the single call; the other rows are verified.
  const std::int32_t outside[2] = {3, static_cast<std::int32_t>(V)};
  bad = rows;
  bad[1].draft = outside;
  bs.sample<float>(bad, res, pool);
  CHECK(res[1] == nc::verify_result{0, 0, nc::status::invalid_input});
  CHECK(res[0] == nc::verify_result{0, 1, nc::status::ok});
  CHECK(out0[0].token >= 0);
  // The thin alias runs the same call.
  nc::batch_verifier bv;
  std::vector<nc::verify_result> again(2);
  bv.verify<float>(bad, again, pool);
  CHECK(again == res);
}

TEST_CASE("batch: the thread pool runs every task exactly once", "[batch]") {
  for (std::size_t threads : {1u, 2u, 4u}) {
    nc::thread_pool pool(threads);
    CHECK(pool.concurrency() == threads);
    for (std::size_t n : {0u, 1u, 7u, 1000u}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<bool> bad_slot{false};
      pool.bulk(n, [&](std::size_t t, std::size_t slot) {
        hits[t].fetch_add(1);
        if (slot >= threads) bad_slot = true;
      });
      for (auto& h : hits) CHECK(h.load() == 1);
      CHECK_FALSE(bad_slot.load());
    }
  }
  CHECK_THROWS_AS(nc::thread_pool(0), std::invalid_argument);
}

TEST_CASE("batch: the pool takes lvalue tasks and rethrows a task's exception after all ran", "[batch]") {
  nc::thread_pool pool(2);
  std::atomic<int> ran{0};
  auto count = [&](std::size_t, std::size_t) { ran.fetch_add(1); };
  pool.bulk(10, count);
  const auto& ccount = count;
  pool.bulk(10, ccount);
  CHECK(ran.load() == 20);
  ran = 0;
  CHECK_THROWS_AS(pool.bulk(50,
                            [&](std::size_t t, std::size_t) {
                              ran.fetch_add(1);
                              if (t == 7) throw std::runtime_error("task 7");
                            }),
                  std::runtime_error);
  CHECK(ran.load() == 50);
  pool.bulk(4, count);  // still usable
  CHECK(ran.load() == 54);
}

TEST_CASE("batch: processors never create or remove an infinity", "[batch][engine]") {
  std::vector<float> row = {1.0f, 3e38f, -3e38f, nc::to_float(nc::bf16{0x7F80}), -1.0f, 0.5f, 2.0f, 0.0f};
  nc::workspace ws;
  nc::sampling_params p;
  p.frequency_penalty = 3e38f;
  p.logit_bias = {{1, 3e38f}, {2, -3e38f}};
  const nc::sampler s(p);
  const std::vector<std::int32_t> out = {3, 3, 0};
  const auto d = s.process(std::span<const float>(row), ws, {{}, out, {}, 0});
  // Token 3 is +inf (forced) and stays forced: the penalty does not touch it.
  REQUIRE(d.status() == nc::status::ok);
  REQUIRE(d.size() == 1);
  CHECK(d.ids()[0] == 3);
  row[3] = 1.0f;  // without the forced token, token 1 (3e38 + 3e38, clamped to FLT_MAX) wins outright
  const auto r = s.sample(std::span<const float>(row), ws, {{}, out, {}, 0});
  CHECK(r.token == 1);
}

TEST_CASE("batch: a client's huge top_k sizes the scratch by the row, not by k", "[batch]") {
  // top_k = INT_MAX once made batch_sampler reserve 2k + 1024 rank keys (32 GiB) before any row ran.
  const std::size_t V = 1000;
  ref::rng g(5);
  const std::vector<float> row = ref::uniform_row(V, g);
  nc::sampling_params p;
  p.top_k = std::numeric_limits<int>::max();
  p.logprobs = 3;
  const nc::sampler s(p);
  nc::batch_sampler bs;
  const nc::batch_row rows[] = {{&s, {}}};
  nc::row_result out[1];
  REQUIRE_NOTHROW(bs.sample(nc::logits_matrix<float>{row.data(), 1, V, V}, rows, out));
  nc::workspace ws(V);
  CHECK(out[0] == s.sample(std::span<const float>(row), ws, nc::row_request{}));
  CHECK(s.key_capacity(V) == nc::detail::select_capacity(V));
}
