// Hot paths allocate nothing: after one warm-up call per chain with a workspace, further calls (same
// or smaller rows) make no heap allocation. This TU replaces the global allocation functions.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <new>

#include <nucleus/engine.hpp>
#include <nucleus/sharded/split.hpp>

#include "reference/cases.hpp"

namespace {

std::atomic<std::uint64_t> allocations{0};

void* counted(std::size_t n, std::size_t align) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align <= alignof(std::max_align_t) ? std::malloc(n)
                                               : std::aligned_alloc(align, (n + align - 1) / align * align);
  return p;
}

}  // namespace

void* operator new(std::size_t n) {
  if (void* p = counted(n, 0)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted(n, 0)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = counted(n, static_cast<std::size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  if (void* p = counted(n, static_cast<std::size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return counted(n, 0);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return counted(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace nc = nucleus;
namespace ref = nucleus_ref;

namespace {

struct rows {
  std::vector<std::vector<float>> all;
  rows(std::size_t V, std::uint64_t seed) {
    ref::rng g(seed);
    for (auto kind : ref::all_row_kinds) all.push_back(ref::make_row(kind, V, g));
    all.push_back(ref::make_row(ref::row_kind::peaky, V / 3 + 1, g));  // smaller rows reuse the buffers
    all.push_back(ref::make_row(ref::row_kind::uniform, 1, g));
    all.push_back({});
  }
};

// Allocations made by `calls` after one warm-up round of the same calls on the largest row.
template <class F>
std::uint64_t allocations_after_warmup(const rows& r, F&& calls) {
  calls(r.all.front());
  std::uint64_t before = allocations.load();
  for (int round = 0; round < 3; ++round)
    for (auto& row : r.all) calls(row);
  return allocations.load() - before;
}

}  // namespace

TEST_CASE("allocation: the counter sees allocations", "[core][allocation]") {
  std::uint64_t before = allocations.load();
  // Direct calls: a new-expression's allocation may be elided by the optimizer, these may not.
  void* a = ::operator new(100);
  void* b = ::operator new[](100);
  ::operator delete[](b);
  ::operator delete(a);
  CHECK(allocations.load() - before == 2);
}

TEST_CASE("allocation: chains allocate nothing after a warm-up call", "[core][allocation]") {
  using call = std::function<void(std::span<const float>)>;
  for (std::size_t V : {9u, 1000u, 151936u}) {
    rows r(V, V);
    nc::workspace ws[8];  // one per call: each warms up its own
    std::vector<float> out(V);
    auto full =
        nc::top_k(40) | nc::top_p(0.95f) | nc::min_p(0.05f) | nc::temperature(0.8f) | nc::categorical();
    auto hot = nc::temperature(0.7f) | nc::top_p(0.9f) | nc::categorical();
    auto greedy = nc::min_p(0.1f) | nc::top_k(0) | nc::temperature(0.0f) | nc::categorical();
    auto proc = nc::temperature(1.3f) | nc::top_k(100) | nc::top_p(0.8f);
    std::pair<const char*, call> calls[] = {
        {"categorical",
         [&](std::span<const float> row) {
           (void)nc::categorical()(row, ws[0], nc::draw_key{1, 2});
         }},
        {"argmax", [&](std::span<const float> row) { (void)nc::argmax()(row, ws[1]); }},
        {"default chain",
         [&](std::span<const float> row) {
           (void)full(row, ws[2], nc::draw_key{3, 4});
         }},
        {"temperature | top_p",
         [&](std::span<const float> row) {
           (void)hot(row, ws[3], nc::draw_key{3, 4});
         }},
        {"T = 0 chain",
         [&](std::span<const float> row) {
           (void)greedy(row, ws[4], nc::draw_key{3, 4});
         }},
        {"distribution", [&](std::span<const float> row) { (void)proc(row, ws[5]); }},
        {"top_p alone", [&](std::span<const float> row) { (void)nc::top_p(0.5f)(row, ws[6]); }},
        {"top_logprobs", [&](std::span<const float> row) { (void)nc::top_logprobs(row, 8, ws[7]); }},
        {"log_softmax",
         [&](std::span<const float> row) {
           if (!row.empty()) (void)nc::log_softmax(row, std::span<float>(out.data(), row.size()));
         }},
    };
    for (auto& [name, f] : calls) {
      std::uint64_t n = allocations_after_warmup(r, f);
      INFO("V=" << V << " " << name);
      CHECK(n == 0);
    }
  }
}

TEST_CASE("allocation: a workspace reserved for V allocates nothing even on the first call",
          "[core][allocation]") {
  // workspace::reserve(V) is documented to size every buffer for rows of up to V logits.
  ref::rng g(9);
  const std::size_t V = 50000;
  auto row = ref::peaky_row(V, g);
  nc::workspace ws(V);
  auto chain =
      nc::top_k(40) | nc::top_p(0.95f) | nc::min_p(0.05f) | nc::temperature(0.8f) | nc::categorical();
  nc::workspace ws2;
  ws2.reserve(V);
  std::uint64_t before = allocations.load();
  (void)chain(row, ws, nc::draw_key{1, 1});
  (void)(nc::top_p(0.9f) | nc::categorical())(row, ws2, nc::draw_key{1, 1});
  (void)nc::top_logprobs(row, 8, ws);
  std::uint64_t n = allocations.load() - before;
  CHECK(n == 0);
}

TEST_CASE("allocation: engine samplers and batches allocate nothing after a warm-up call",
          "[core][allocation][engine]") {
  const std::size_t V = 151936, B = 8;
  ref::rng g(17);
  std::vector<float> m(B * V);
  std::vector<nc::bf16> mb(B * V);
  for (std::size_t r = 0; r < B; ++r) {
    const auto row = ref::make_row(ref::all_row_kinds[r % std::size(ref::all_row_kinds)], V, g);
    for (std::size_t i = 0; i < V; ++i) {
      m[r * V + i] = row[i];
      mb[r * V + i] = nc::to_bf16(row[i]);
    }
  }
  nc::sampling_params p;
  p.temperature = 0.7f;
  p.top_k = 50;
  p.top_p = 0.9f;
  p.repetition_penalty = 1.2f;
  p.frequency_penalty = 0.3f;
  p.logit_bias = {{5, 1.0f}};
  p.min_tokens = 100;
  p.eos_token_ids = {2};
  p.logprobs = 8;
  nc::sampling_params q = p;
  q.logprobs_mode = nc::logprob_mode::processed;
  // The samplers only some engines have: DRY and no-repeat-ngram read the history's sequence.
  nc::sampling_params l = q;
  l.typical_p = 0.9f;
  l.top_n_sigma = 2.0f;
  l.xtc_probability = 0.5f;
  l.dynatemp_range = 0.3f;
  l.dry_multiplier = 0.8f;
  l.dry_sequence_breakers = {{7}, {8, 9}};
  nc::sampling_params h;
  h.typical_p = 0.95f;
  h.epsilon_cutoff = 3e-4f;
  h.eta_cutoff = 1e-3f;
  h.no_repeat_ngram_size = 3;
  h.repetition_penalty = 1.1f;
  const nc::sampler samplers[] = {nc::presets::vllm(p), nc::presets::hf(h), nc::presets::llama_cpp(l),
                                  nc::sampler(q)};
  std::vector<std::int32_t> prompt(300), output(200);
  for (auto& t : prompt) t = static_cast<std::int32_t>(g.below(V));
  for (auto& t : output) t = static_cast<std::int32_t>(g.below(V));
  std::vector<std::uint32_t> mask((V + 31) / 32, 0xF0F0F0F0u);
  std::vector<nc::batch_row> rows;
  for (std::size_t r = 0; r < B; ++r)
    rows.push_back({&samplers[r % 4],
                    {prompt, output,
                     r % 2 ? std::span<const std::uint32_t>(mask) : std::span<const std::uint32_t>{}, r}});
  std::vector<nc::row_result> out(B);
  std::vector<nc::token_logprob> top(B * nc::max_logprobs);
  nc::batch_sampler bs(V, 2);
  nc::thread_pool pool(2);
  auto round = [&] {
    bs.sample(nc::logits_matrix<float>{m.data(), B, V, V}, rows, out, nc::inline_executor{}, top,
              nc::max_logprobs);
    bs.sample(nc::logits_matrix<nc::bf16>{mb.data(), B, V, V}, rows, out, pool, top, nc::max_logprobs);
  };
  round();
  const std::uint64_t before = allocations.load();
  for (int i = 0; i < 3; ++i) round();
  CHECK(allocations.load() - before == 0);
  for (const auto& r : out) CHECK(r.status == nc::status::ok);
}

TEST_CASE("allocation: a batch of verification and plain rows allocates nothing after a warm-up call",
          "[core][allocation][engine][speculative]") {
  const std::size_t V = 32000, requests = 8;
  ref::rng g(23);
  nc::sampling_params p;
  p.temperature = 0.8f;
  p.top_k = 50;
  p.top_p = 0.9f;
  p.repetition_penalty = 1.2f;
  p.logit_bias = {{5, 1.0f}};
  p.logprobs = 8;
  nc::sampling_params l = p;
  l.dry_multiplier = 0.8f;
  l.typical_p = 0.9f;
  nc::sampling_params greedy;
  greedy.temperature = 0.0f;
  greedy.no_repeat_ngram_size = 3;
  const nc::sampler samplers[] = {nc::sampler(p), nc::presets::llama_cpp(l), nc::presets::hf(greedy)};
  std::vector<std::int32_t> prompt(300), output(200);
  for (auto& t : prompt) t = static_cast<std::int32_t>(g.below(V));
  for (auto& t : output) t = static_cast<std::int32_t>(g.below(V));
  std::vector<std::uint32_t> mask((V + 31) / 32, 0xFFFF0FFFu);
  // Request j has a draft of k = j % 4 tokens (k = 0: a plain row); its k + 1 rows are consecutive
  // in one matrix, as a target model writes them. Drafts are the rows' argmax, so most stand and
  // the history grows; odd requests carry draft probabilities.
  std::size_t total = 0;
  for (std::size_t j = 0; j < requests; ++j) total += j % 4 + 1;
  std::vector<float> m(total * V);
  std::vector<nc::bf16> mb(total * V);
  for (std::size_t r = 0; r < total; ++r) {
    const auto row = ref::peaky_row(V, g);
    for (std::size_t i = 0; i < V; ++i) {
      m[r * V + i] = row[i];
      mb[r * V + i] = nc::to_bf16(row[i]);
    }
  }
  std::vector<std::vector<std::int32_t>> drafts(requests);
  std::vector<std::vector<float>> probs(requests);
  std::vector<std::vector<nc::row_result>> outs(requests);
  std::vector<std::vector<nc::token_logprob>> tops(requests,
                                                   std::vector<nc::token_logprob>(nc::max_logprobs));
  std::vector<nc::verify_row<float>> rows;
  std::vector<nc::verify_row<nc::bf16>> rows_b;
  for (std::size_t j = 0, at = 0; j < requests; ++j) {
    const std::size_t k = j % 4;
    for (std::size_t i = 0; i < k; ++i) {
      const float* r = m.data() + (at + i) * V;
      drafts[j].push_back(static_cast<std::int32_t>(std::max_element(r, r + V) - r));
    }
    if (j % 2) probs[j].assign(k * V, 1.0f / static_cast<float>(V));
    outs[j].resize(k + 1);
    const nc::row_request rq{prompt, output,
                             j % 3 ? std::span<const std::uint32_t>{} : std::span<const std::uint32_t>(mask),
                             100 + j};
    rows.push_back(
        {&samplers[j % 3], rq, {m.data() + at * V, k + 1, V, V}, drafts[j], probs[j], outs[j], tops[j]});
    rows_b.push_back(
        {&samplers[j % 3], rq, {mb.data() + at * V, k + 1, V, V}, drafts[j], probs[j], outs[j], tops[j]});
    at += k + 1;
  }
  std::vector<nc::verify_result> results(requests);
  nc::batch_sampler bs;
  nc::thread_pool pool(2);
  std::uint32_t stood = 0;
  auto round = [&] {
    bs.sample<float>(rows, results, nc::inline_executor{});
    bs.sample<nc::bf16>(rows_b, results, pool);
  };
  round();
  const std::uint64_t before = allocations.load();
  for (int i = 0; i < 3; ++i) round();
  CHECK(allocations.load() - before == 0);
  for (const auto& r : results) {
    CHECK(r.status == nc::status::ok);
    stood += r.accepted;
  }
  CHECK(stood > 0);
}

TEST_CASE("allocation: one row split across shards allocates nothing after a warm-up call",
          "[core][allocation][sharded]") {
  const std::size_t V = 151936;
  ref::rng g(23);
  std::vector<std::vector<float>> rows;
  for (ref::row_kind k :
       {ref::row_kind::peaky, ref::row_kind::flat, ref::row_kind::pos_inf, ref::row_kind::nan})
    rows.push_back(ref::make_row(k, V, g));
  // Every path: greedy, top-k (ties kept), top-p (leaders and the histogram spill), dense, gather.
  std::vector<nc::sampling_params> ps(6);
  ps[0].temperature = 0.0f;
  ps[1].top_k = 40;
  ps[1].logprobs = 5;
  ps[2].top_p = 0.9f;
  ps[2].logprobs = 3;
  ps[2].logprobs_mode = nc::logprob_mode::processed;
  ps[3].min_p = 0.05f;
  ps[3].repetition_penalty = 1.2f;
  ps[4].typical_p = 0.9f;
  ps[5].top_p = 0.5f;
  const nc::sampler samplers[] = {nc::sampler(ps[0]),     nc::presets::vllm(ps[1]),
                                  nc::sampler(ps[2]),     nc::presets::llama_cpp(ps[3]),
                                  nc::presets::hf(ps[4]), nc::sampler(ps[5])};
  std::vector<std::int32_t> output(50);
  for (auto& t : output) t = static_cast<std::int32_t>(g.below(V));
  std::vector<nc::split_sampler> splits;
  for (const auto& s : samplers) splits.emplace_back(s, 2, /*budget=*/64);
  nc::thread_pool pool(2);
  std::vector<nc::token_logprob> top(8);
  auto round = [&](std::uint64_t position) {
    for (auto& sp : splits)
      for (const auto& row : rows) {
        nc::row_request rq;
        rq.output = output;
        rq.position = position;
        sp.sample(std::span<const float>(row), rq, std::span<nc::token_logprob>(top), pool);
      }
  };
  round(0);
  round(1);
  for (std::size_t k = 0; k < splits.size(); ++k) {
    INFO("sampler " << k);  // (Catch's message is built before the count starts)
    const std::uint64_t before = allocations.load();
    for (std::uint64_t i = 2; i < 5; ++i)
      for (const auto& row : rows) {
        nc::row_request rq;
        rq.output = output;
        rq.position = i;
        splits[k].sample(std::span<const float>(row), rq, std::span<nc::token_logprob>(top), pool);
      }
    CHECK(allocations.load() - before == 0);
  }
}
