// Speculative decoding's verification step: a draft proposed k tokens, the target model scored the k
// positions plus one; the request's sampler decides which draft tokens stand so that every emitted
// token follows exactly the distribution that sampler defines on the target's rows (Leviathan et al.
// 2023, Chen et al. 2023; vLLM's rejection sampler). Rules and edge cases: docs/semantics.md.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "nucleus/core/draw_key.hpp"
#include "nucleus/engine/batch.hpp"
#include "nucleus/engine/sampler.hpp"

namespace nucleus {

struct verify_result {
  std::uint32_t accepted = 0;  // draft tokens that stand
  std::uint32_t emitted = 0;   // tokens written to out: accepted + 1 (the corrective or bonus token)
  nucleus::status status = nucleus::status::ok;

  friend bool operator==(const verify_result&, const verify_result&) = default;
};

// One request's verification: `target` holds k + 1 rows (row i scores draft position i; row k is the
// bonus row), `draft` the k draft tokens, and `draft_probs` either the draft's processed
// distributions (k rows of V, row-major) or nothing, for drafts without probabilities (n-gram,
// prompt lookup), which count as one-hot at each draft token as vLLM treats them. out needs k + 1
// entries; out[i] gets the emitted token with its log-probability in the target's processed
// distribution. The scratch (the growing history) is reused: no allocation after warm-up.
class draft_verifier {
 public:
  template <logit_type T>
  verify_result verify(const sampler& s, const logits_matrix<T>& target, std::span<const std::int32_t> draft,
                       std::span<const float> draft_probs, workspace& ws, const row_request& rq,
                       std::span<row_result> out) {
    const std::size_t k = draft.size();
    const std::size_t V = target.vocab;
    if (target.rows != k + 1) fail("target must hold draft.size() + 1 rows");
    if (out.size() < k + 1) fail("out must hold draft.size() + 1 entries");
    if (!draft_probs.empty() && draft_probs.size() != k * V) fail("draft_probs must be empty or hold k * V");
    if (k > 0 && target.data == nullptr) fail("target.data is null");
    if (V == 0) return {0, 0, status::empty_row};
    if (s.params().mirostat != 0) return {0, 0, status::invalid_input};  // mu changes with every draw
    for (std::int32_t t : draft)
      if (t < 0 || static_cast<std::size_t>(t) >= V) return {0, 0, status::invalid_input};
    history_.assign(rq.output.begin(), rq.output.end());
    const bool greedy = s.params().temperature == 0.0f;
    for (std::size_t i = 0; i < k; ++i) {
      row_request ri = rq;
      ri.output = history_;
      ri.position = rq.position + i;
      const distribution d = s.process(target.row(i), ws, ri);
      const auto accepted = static_cast<std::uint32_t>(i);
      if (d.status() != status::ok) return {accepted, accepted, d.status()};
      const std::int32_t x = draft[i];
      const float* q = draft_probs.empty() ? nullptr : draft_probs.data() + i * V;
      const double qx = q ? static_cast<double>(q[x]) : 1.0;
      if (!(qx >= 0.0 && qx <= 1.0)) return {accepted, accepted, status::invalid_input};
      const double px = prob_of(d, x);
      const draw_key key{s.params().seed, ri.position, rq.stream};
      // Greedy needs no coin: the draft stands while it is the target's argmax (p is one-hot there).
      const bool accept = greedy ? px > 0.0 : detail::uniform(key, detail::key_stream::verify) * qx < px;
      if (accept) {
        out[i] = {x, static_cast<float>(std::log(px)), 0, 0, status::ok};
        history_.push_back(x);
        continue;
      }
      const std::int32_t y = greedy ? d.ids()[0] : residual_draw(d, q, x, key);
      if (y < 0) return {accepted, accepted, status::invalid_input};
      out[i] = {y, static_cast<float>(std::log(prob_of(d, y))), 0, 0, status::ok};
      return {accepted, accepted + 1, status::ok};
    }
    // Every draft token stood: the bonus token is the sampler's own draw on the last row.
    row_request rk = rq;
    rk.output = history_;
    rk.position = rq.position + k;
    const row_result b = s.sample(target.row(k), ws, rk);
    const auto all = static_cast<std::uint32_t>(k);
    if (b.status != status::ok) return {all, all, b.status};
    out[k] = {b.token, b.logprob, 0, 0, status::ok};
    return {all, all + 1, status::ok};
  }

  // Room for a history of n tokens (the request's output plus its draft): later calls within it
  // allocate nothing.
  void reserve(std::size_t n) { history_.reserve(n); }

 private:
  [[noreturn]] static void fail(const char* what) {
    throw std::invalid_argument(std::string("nucleus::draft_verifier: ") + what);
  }

  static double prob_of(const distribution& d, std::int32_t t) {
    const auto ids = d.ids();
    for (std::size_t j = 0; j < ids.size(); ++j)
      if (ids[j] == t) return static_cast<double>(d.probs()[j]);
    return 0.0;
  }

  // A draw from normalize(max(p - q, 0)) over p's support, in the distribution's order, with the
  // key's draw stream; p itself when the residual has no positive mass (p <= q everywhere: with
  // exact arithmetic a rejection cannot happen then, with rounding it can). -1 for a bad q.
  static std::int32_t residual_draw(const distribution& d, const float* q, std::int32_t x, draw_key key) {
    const auto ids = d.ids();
    const auto probs = d.probs();
    auto residual = [&](std::size_t j) -> double {
      const double qj = q ? static_cast<double>(q[ids[j]]) : (ids[j] == x ? 1.0 : 0.0);
      const double r = static_cast<double>(probs[j]) - qj;
      return r > 0.0 ? r : 0.0;
    };
    double total = 0.0;
    for (std::size_t j = 0; j < ids.size(); ++j) {
      if (q && !(q[ids[j]] >= 0.0f && q[ids[j]] <= 1.0f)) return -1;
      total += residual(j);
    }
    const bool use_p = !(total > 0.0);
    if (use_p)
      for (float p : probs) total += static_cast<double>(p);
    const double u = detail::uniform(key) * total;
    double sum = 0.0;
    std::size_t last = 0;
    for (std::size_t j = 0; j < ids.size(); ++j) {
      const double w = use_p ? static_cast<double>(probs[j]) : residual(j);
      if (w <= 0.0) continue;
      last = j;
      sum += w;
      if (u < sum) return ids[j];
    }
    return ids[last];  // u within rounding of the total
  }

  std::vector<std::int32_t> history_;
};

// A batch of verifications: row r is one request's draft; a request with no draft (k = 0) is a plain
// row, whose result is the sampler's own draw. Results depend only on each row's inputs: the same
// under any executor, thread count or row order.
template <logit_type T>
struct verify_row {
  const nucleus::sampler* sampler = nullptr;
  row_request request;
  logits_matrix<T> target;              // draft.size() + 1 rows
  std::span<const std::int32_t> draft;  // k tokens
  std::span<const float> draft_probs;   // empty or k * V
  std::span<row_result> out;            // k + 1 entries
};

class batch_verifier {
 public:
  template <logit_type T, class E = inline_executor>
  requires executor<std::remove_cvref_t<E>>
  void verify(std::span<const verify_row<T>> rows, std::span<verify_result> results, E&& ex = E{}) {
    if (results.size() != rows.size())
      throw std::invalid_argument("nucleus::batch_verifier: results.size() must equal rows.size()");
    std::size_t V = 0, keys = 0, history = 0;
    for (const verify_row<T>& r : rows) {
      if (r.sampler == nullptr) throw std::invalid_argument("nucleus::batch_verifier: a row has no sampler");
      V = std::max(V, r.target.vocab);
      keys = std::max(keys, r.sampler->key_capacity());
      history = std::max(history, r.request.output.size() + r.draft.size());
    }
    const std::size_t slots = ex.concurrency();
    if (spaces_.size() < slots) {
      spaces_.resize(slots);
      verifiers_.resize(slots);
    }
    for (auto& ws : spaces_) {  // sized here, on the calling thread: the tasks never allocate
      ws.reserve(V);
      ws.processed.ensure(V);
      ws.counts.ensure_zeroed(V);
      ws.keys.ensure(keys);
    }
    for (auto& v : verifiers_) v.reserve(history);
    ex.bulk(rows.size(), [&](std::size_t r, std::size_t slot) {
      const verify_row<T>& row = rows[r];
      results[r] = verifiers_[slot].verify(*row.sampler, row.target, row.draft, row.draft_probs,
                                           spaces_[slot], row.request, row.out);
    });
  }

 private:
  std::vector<workspace> spaces_;
  std::vector<draft_verifier> verifiers_;
};

}  // namespace nucleus
