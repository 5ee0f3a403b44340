// The GPU sampler on a device against nc::sampler on the host (scripts/gpu-check runs it; it needs a
// GPU, so ctest only builds it). Checks: (1) >= 20,000 random rows (every order, dtype, the
// vocabulary sizes of tests/cuda/host_equality.cpp, NaN / +-inf / ties, logprobs in both modes, the
// request processors), token, status, rank and top-n ids equal, and every logprob equal to the bit
// or, where CUDA's double log differs from glibc's in its last bit, within that log's ulp (counted
// and printed apart); (2) batch invariance: a row's result does not depend on its batch or its
// place in it; (3) a chi-square test of the draw's distribution against the processed
// distribution; (4) a captured CUDA graph replayed with new positions. Exit 0: all passed; 77: no
// device; 1: a check failed.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cases.hpp"
#include "gpu_launch.hpp"

namespace {

namespace nc = nucleus;
using gpu_cases::row_case;

int failures = 0;

void fail(const std::string& what) {
  ++failures;
  if (failures <= 20) std::printf("FAIL: %s\n", what.c_str());
}

std::size_t elem_size(nc::logit_dtype d) {
  return d == nc::logit_dtype::f32 ? 4 : 2;
}

// Cases of one vocabulary size and dtype as one launch (rows `stride` apart, stride > V).
gpu_launch::batch_in batch_of(const std::vector<const row_case*>& cs, std::size_t pad) {
  gpu_launch::batch_in b;
  b.dtype = cs.front()->dtype;
  b.rows = static_cast<std::uint32_t>(cs.size());
  b.vocab = static_cast<std::uint32_t>(cs.front()->vocab());
  b.stride = b.vocab + pad;
  const std::size_t es = elem_size(b.dtype);
  b.logits.assign(b.rows * b.stride * es, 0xff);  // padding: NaN in every dtype, never read
  for (std::uint32_t r = 0; r < b.rows; ++r) {
    std::memcpy(b.logits.data() + r * b.stride * es, cs[r]->data(), b.vocab * es);
    const row_case& c = *cs[r];
    b.params.push_back(nucleus::cuda::make_row_params(c.params, c.order, b.lists));
    gpu_launch::batch_in::row_span sp;
    sp.prompt_at = b.tokens.size();
    sp.prompt_size = c.prompt.size();
    b.tokens.insert(b.tokens.end(), c.prompt.begin(), c.prompt.end());
    sp.output_at = b.tokens.size();
    sp.output_size = c.output.size();
    b.tokens.insert(b.tokens.end(), c.output.begin(), c.output.end());
    if (!c.bitmask.empty()) {
      sp.mask_at = static_cast<long long>(b.masks.size());
      b.masks.insert(b.masks.end(), c.bitmask.begin(), c.bitmask.end());
    }
    b.spans.push_back(sp);
    b.top_n = std::max<std::uint32_t>(b.top_n, static_cast<std::uint32_t>(c.top_room()));
    if (gpu_cases::has_processors(c)) b.processors = true;
    b.seeds.push_back(cs[r]->params.seed);
    b.positions.push_back(cs[r]->position);
    b.streams.push_back(cs[r]->stream);
    b.mu.push_back(cs[r]->mu);
  }
  return b;
}

// 0: the same bits; else the float ulps between them (huge across signs).
std::uint32_t ulps(float a, float b) {
  const auto ia = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a));
  const auto ib = static_cast<std::int64_t>(std::bit_cast<std::int32_t>(b));
  return static_cast<std::uint32_t>(std::min<std::int64_t>(std::llabs(ia - ib), 0xffffffff));
}

struct tally {
  int cases = 0, exact = 0, libm = 0, ranked = 0, listed = 0;
};

// A logprob the GPU may give with CUDA's log in place of glibc's: within one float ulp, or (raw:
// (x - max) - lse with lse one ulp apart) within one ulp of a normalizer below 16.
bool near(float a, float b) {
  return ulps(a, b) <= 1 || std::fabs(static_cast<double>(a) - static_cast<double>(b)) <= 0x1p-19;
}

void compare(const row_case& c, const gpu_cases::answer<nc::row_result>& ref, const gpu_launch::batch_out& o,
             std::size_t i, std::uint32_t top_n, tally& t) {
  ++t.cases;
  const nc::row_result& r = ref.r;
  const auto st = static_cast<nc::status>(o.statuses[i]);
  if (r.token != o.tokens[i] || r.status != st || r.rank != o.ranks[i] || r.top_count != o.top_counts[i]) {
    fail(gpu_cases::describe(c) + ": cpu token " + std::to_string(r.token) + " status " +
         std::to_string(static_cast<int>(r.status)) + " rank " + std::to_string(r.rank) + " top " +
         std::to_string(r.top_count) + ", gpu token " + std::to_string(o.tokens[i]) + " status " +
         std::to_string(static_cast<int>(st)) + " rank " + std::to_string(o.ranks[i]) + " top " +
         std::to_string(o.top_counts[i]));
    return;
  }
  bool exact = gpu_cases::same_bits(r.logprob, o.logprobs[i]);
  bool close = near(r.logprob, o.logprobs[i]);
  for (std::size_t j = 0; j < ref.top.size(); ++j) {
    const std::size_t at = i * top_n + j;
    if (ref.top[j].token != o.top_ids[at]) {
      fail(gpu_cases::describe(c) + ": top[" + std::to_string(j) + "] cpu id " +
           std::to_string(ref.top[j].token) + " gpu id " + std::to_string(o.top_ids[at]));
      return;
    }
    exact = exact && gpu_cases::same_bits(ref.top[j].logprob, o.top_logprobs[at]);
    close = close && near(ref.top[j].logprob, o.top_logprobs[at]);
  }
  if (c.params.mirostat != 0) {  // mu moves by eta times the drawn logprob's difference in bits
    exact = exact && gpu_cases::same_bits(ref.mu, o.mu[i]);
    close = close && (ulps(ref.mu, o.mu[i]) <= 1 ||
                      std::fabs(static_cast<double>(ref.mu) - static_cast<double>(o.mu[i])) <=
                          0x1p-18 * (1.0 + static_cast<double>(c.params.mirostat_eta)));
  }
  if (r.status == nc::status::ok && c.params.logprobs >= 0) ++t.ranked;
  if (!ref.top.empty()) ++t.listed;
  if (exact) {
    ++t.exact;
  } else if (close) {
    ++t.libm;
  } else {
    fail(gpu_cases::describe(c) + ": logprobs differ beyond CUDA's log (cpu " + std::to_string(r.logprob) +
         " gpu " + std::to_string(o.logprobs[i]) + ")");
  }
}

bool same_out(const gpu_launch::batch_out& a, std::size_t i, std::uint32_t an, const gpu_launch::batch_out& b,
              std::size_t j, std::uint32_t bn) {
  if (!(a.tokens[i] == b.tokens[j] && a.statuses[i] == b.statuses[j] && a.ranks[i] == b.ranks[j] &&
        a.top_counts[i] == b.top_counts[j] && gpu_cases::same_bits(a.logprobs[i], b.logprobs[j]) &&
        gpu_cases::same_bits(a.mu[i], b.mu[j])))
    return false;
  for (std::uint32_t k = 0; k < a.top_counts[i]; ++k)
    if (a.top_ids[i * an + k] != b.top_ids[j * bn + k] ||
        !gpu_cases::same_bits(a.top_logprobs[i * an + k], b.top_logprobs[j * bn + k]))
      return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // --cases N: random rows (default 20,000); --max-vocab V: only the sizes up to V; --quick: no
  // chi-square and no graph (for the sanitizer runs, which are slow).
  int total_cases = 20000;
  std::size_t max_vocab = ~std::size_t{0};
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--cases" && i + 1 < argc) {
      total_cases = std::atoi(argv[++i]);
    } else if (a == "--max-vocab" && i + 1 < argc) {
      max_vocab = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--quick") {
      quick = true;
    } else {
      std::printf("usage: gpu_check [--cases N] [--max-vocab V] [--quick]\n");
      return 2;
    }
  }
  std::string name;
  if (const std::string e = gpu_launch::device(name); !e.empty()) {
    std::printf("gpu_check: %s; nothing to check here\n", e.c_str());
    return 77;
  }
  std::printf("gpu_check: device %s, %d random cases\n", name.c_str(), total_cases);

  // (1) Equality over random cases, one launch per (vocabulary, dtype).
  struct tier {
    std::size_t vocab;
    double share;
  };
  const tier tiers[] = {{1, 0.15}, {1000, 0.55}, {32000, 0.25}, {151936, 0.03}, {248320, 0.02}};
  std::mt19937_64 rng(0x6e75636c657573);
  nc::workspace ws;
  tally all;
  std::vector<row_case> invariance_cases;
  double kept_share = 0;
  for (const tier& t : tiers)
    if (t.vocab <= max_vocab) kept_share += t.share;
  for (const tier& t : tiers) {
    if (t.vocab > max_vocab) continue;
    const int n = std::max(1, static_cast<int>(total_cases * t.share / kept_share));
    std::vector<row_case> cases;
    cases.reserve(n);
    for (int i = 0; i < n; ++i) cases.push_back(gpu_cases::random_case(rng, t.vocab));
    for (nc::logit_dtype d : {nc::logit_dtype::f32, nc::logit_dtype::bf16, nc::logit_dtype::f16}) {
      std::vector<const row_case*> group;
      for (const row_case& c : cases)
        if (c.dtype == d) group.push_back(&c);
      if (group.empty()) continue;
      // Launches of at most 2048 rows (device memory: 2048 x 248320 floats is 2 GB).
      for (std::size_t b0 = 0; b0 < group.size(); b0 += 2048) {
        const std::vector<const row_case*> part(group.begin() + b0,
                                                group.begin() + std::min(group.size(), b0 + 2048));
        const gpu_launch::batch_in in = batch_of(part, 1 + static_cast<std::size_t>(d) * 3);
        gpu_launch::batch_out out;
        if (const std::string e = gpu_launch::run(in, out); !e.empty()) {
          fail("launch: " + e);
          continue;
        }
        std::printf("  V=%zu dtype=%d: %zu rows in %.3f ms\n", t.vocab, static_cast<int>(d), part.size(),
                    out.ms);
        if (!out.counts_zero) fail("the penalties' counts were not left zero");
        for (std::size_t i = 0; i < part.size(); ++i)
          compare(*part[i], gpu_cases::reference(*part[i], ws), out, i, in.top_n, all);
      }
    }
    if (t.vocab == 1000)
      invariance_cases.assign(cases.begin(), cases.begin() + std::min<std::size_t>(cases.size(), 600));
  }
  std::printf(
      "equality: %d cases (%d ok rows with logprobs, %d with a top-n list): %d with every logprob to the "
      "bit, "
      "%d within CUDA's log's ulp\n",
      all.cases, all.ranked, all.listed, all.exact, all.libm);
  if (all.cases < total_cases * 0.99) fail("fewer cases than asked");
  if (all.ranked < all.cases / 3 || all.listed < all.cases / 6) fail("too few rows with logprobs");

  // (2) Batch invariance: each dtype's rows as one batch, one by one, and reversed.
  int invariant = 0;
  for (nc::logit_dtype d : {nc::logit_dtype::f32, nc::logit_dtype::bf16, nc::logit_dtype::f16}) {
    std::vector<const row_case*> group;
    for (const row_case& c : invariance_cases)
      if (c.dtype == d) group.push_back(&c);
    if (group.empty()) continue;
    gpu_launch::batch_out whole, rev;
    const gpu_launch::batch_in whole_in = batch_of(group, 0);
    if (const std::string e = gpu_launch::run(whole_in, whole); !e.empty()) fail("launch: " + e);
    std::vector<const row_case*> reversed(group.rbegin(), group.rend());
    const gpu_launch::batch_in rev_in = batch_of(reversed, 17);
    if (const std::string e = gpu_launch::run(rev_in, rev); !e.empty()) fail("launch: " + e);
    for (std::size_t i = 0; i < group.size() && i < whole.tokens.size() && i < rev.tokens.size(); ++i) {
      gpu_launch::batch_out one;
      if (i % 10 == 0) {  // one row alone
        const gpu_launch::batch_in one_in = batch_of({group[i]}, 0);
        if (const std::string e = gpu_launch::run(one_in, one); !e.empty()) fail("launch: " + e);
        if (one.tokens.empty() || !same_out(whole, i, whole_in.top_n, one, 0, one_in.top_n))
          fail("batch invariance (alone): " + gpu_cases::describe(*group[i]));
      }
      if (!same_out(whole, i, whole_in.top_n, rev, group.size() - 1 - i, rev_in.top_n))
        fail("batch invariance (reversed): " + gpu_cases::describe(*group[i]));
      ++invariant;
    }
  }
  std::printf("batch invariance: %d rows the same in a batch, reversed and alone\n", invariant);

  // (3) Chi-square: one row, many positions, each order; against the processed distribution.
  if (!quick)
    for (nc::engine_order order : {nc::engine_order::nucleus, nc::engine_order::vllm, nc::engine_order::hf,
                                   nc::engine_order::llama_cpp}) {
      constexpr std::size_t v = 1000;
      constexpr std::uint32_t draws = 40000;
      std::mt19937_64 r2(7);
      std::normal_distribution<float> normal(0.0f, 2.0f);
      row_case c;
      c.order = order;
      c.params.temperature = 0.8f;
      c.params.top_k = 200;
      c.params.top_p = 0.95f;
      c.params.min_p = 0.001f;
      c.params.seed = 12345;
      for (std::size_t i = 0; i < v; ++i) c.f32.push_back(normal(r2));
      std::vector<row_case> rows(draws, c);
      std::vector<const row_case*> ptrs;
      for (std::uint32_t i = 0; i < draws; ++i) {
        rows[i].position = i;
        ptrs.push_back(&rows[i]);
      }
      gpu_launch::batch_out out;
      if (const std::string e = gpu_launch::run(batch_of(ptrs, 0), out); !e.empty()) {
        fail("launch: " + e);
        continue;
      }
      const nc::sampler s(c.params, order);
      const nc::distribution dist = s.process(std::span<const float>(c.f32), ws, nc::row_request{});
      std::map<std::int32_t, double> expected;
      for (std::size_t i = 0; i < dist.size(); ++i)
        expected[dist.ids().data() ? dist.ids()[i] : static_cast<std::int32_t>(i)] =
            dist.probs()[i] * double{draws};
      std::map<std::int32_t, double> seen;
      int mismatched = 0;
      for (std::uint32_t i = 0; i < draws; ++i) {
        seen[out.tokens[i]] += 1;
        if (i % 8 == 0) {
          const nc::row_result r = gpu_cases::reference(rows[i], ws).r;
          if (r.token != out.tokens[i]) ++mismatched;
        }
      }
      double chi2 = 0, rest_e = 0, rest_o = 0;
      int bins = 0;
      for (const auto& [id, e] : expected) {
        const double o = seen.count(id) ? seen[id] : 0.0;
        if (e < 5) {
          rest_e += e;
          rest_o += o;
          continue;
        }
        chi2 += (o - e) * (o - e) / e;
        ++bins;
      }
      if (rest_e > 0) {
        chi2 += (rest_o - rest_e) * (rest_o - rest_e) / rest_e;
        ++bins;
      }
      double outside = 0;
      for (const auto& [id, o] : seen)
        if (!expected.count(id)) outside += o;
      const double df = bins - 1, limit = df + 6 * std::sqrt(2 * df);
      std::printf(
          "chi-square (%s): %.1f over %d bins (limit %.1f), %g draws outside the distribution, %d of %u "
          "checked draws differ from the CPU\n",
          gpu_cases::order_name(order), chi2, bins, limit, outside, mismatched, draws / 8);
      if (!(chi2 < limit) || outside > 0 || mismatched > 0)
        fail(std::string("chi-square ") + gpu_cases::order_name(order));
    }

  // (4) A captured graph replayed with new positions written to the device array.
  if (!quick) {
    std::vector<const row_case*> group;
    for (const row_case& c : invariance_cases)
      if (c.dtype == nc::logit_dtype::f32 && group.size() < 64) group.push_back(&c);
    const gpu_launch::batch_in in = batch_of(group, 0);
    std::vector<std::vector<std::uint64_t>> sets;
    for (std::uint64_t k = 0; k < 3; ++k) {
      std::vector<std::uint64_t> p;
      for (const row_case* c : group) p.push_back(c->position + 1000 * k);
      sets.push_back(p);
    }
    std::vector<gpu_launch::batch_out> outs;
    if (const std::string e = gpu_launch::run_graph(in, sets, outs); !e.empty()) fail("graph: " + e);
    tally g;
    std::vector<float> mu;  // mirostat rows: each replay starts from the mu the one before left
    for (const row_case* c : group) mu.push_back(c->mu);
    for (std::size_t k = 0; k < outs.size(); ++k)
      for (std::size_t i = 0; i < group.size(); ++i) {
        row_case c = *group[i];
        c.position = sets[k][i];
        c.mu = mu[i];
        const auto ref = gpu_cases::reference(c, ws);
        compare(c, ref, outs[k], i, in.top_n, g);
        mu[i] = ref.mu;
      }
    std::printf("graph replay: %d rows over %zu replays, all as the CPU unless listed\n", g.cases,
                outs.size());
  }

  std::printf("gpu_check: %s (%d failures)\n", failures == 0 ? "PASSED" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
