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
#include "nucleus/engine/logits_matrix.hpp"
#include "nucleus/engine/sampler.hpp"

namespace nucleus {

struct verify_result {
  std::uint32_t accepted = 0;  // draft tokens that stand
  std::uint32_t emitted = 0;   // tokens written to out: accepted + 1 (the corrective or bonus token)
  nucleus::status status = nucleus::status::ok;

  friend bool operator==(const verify_result&, const verify_result&) = default;
};

namespace detail {

// The first way a verification's shapes disagree, or nullptr: the single call and the batch check
// the same rules (the batch before it touches any row).
template <logit_type T>
const char* verify_shape_error(const logits_matrix<T>& target, std::size_t k, std::size_t draft_probs,
                               std::size_t out) noexcept {
  if (target.rows != k + 1) return "target must hold draft.size() + 1 rows";
  if (out < k + 1) return "out must hold draft.size() + 1 entries";
  if (draft_probs != 0 && draft_probs != k * target.vocab) return "draft_probs must be empty or hold k * V";
  if (target.vocab > 0 && target.data == nullptr) return "target.data is null";
  if (target.rows > 1 && target.stride < target.vocab) return "target.stride must be >= target.vocab";
  return nullptr;
}

}  // namespace detail

// One request's verification: `target` holds k + 1 rows (row i scores draft position i; row k is the
// bonus row), `draft` the k draft tokens, and `draft_probs` either the draft's processed
// distributions (k rows of V, row-major) or nothing, for drafts without probabilities (n-gram,
// prompt lookup), which count as one-hot at each draft token as vLLM treats them. out needs k + 1
// entries; out[i] gets the emitted token with its log-probability in the target's processed
// distribution, except out[k], which is sampler::sample's row_result on row k (with `top` as that
// call's top-n), whatever its status. So k = 0 is a plain draw, bit for bit, for any sampler. The
// scratch (the growing history) is reused: no allocation after warm-up.
class draft_verifier {
 public:
  template <logit_type T>
  verify_result verify(const sampler& s, const logits_matrix<T>& target, std::span<const std::int32_t> draft,
                       std::span<const float> draft_probs, workspace& ws, const row_request& rq,
                       std::span<row_result> out, std::span<token_logprob> top = {}) {
    const std::size_t k = draft.size();
    const std::size_t V = target.vocab;
    if (const char* e = detail::verify_shape_error(target, k, draft_probs.size(), out.size())) fail(e);
    if (k > 0) {
      if (V == 0) return {0, 0, status::empty_row};
      if (s.params().mirostat != 0) return {0, 0, status::invalid_input};  // mu moves with every draw
      for (std::int32_t t : draft)
        if (t < 0 || static_cast<std::size_t>(t) >= V) return {0, 0, status::invalid_input};
    }
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
      const draw_key key = key_of(ri, s.params().seed);
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
    out[k] = s.sample(target.row(k), ws, rk, top);
    const auto all = static_cast<std::uint32_t>(k);
    if (out[k].status != status::ok) return {all, all, out[k].status};
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

// One request's row in batch_sampler::sample's verification call: a draft of k tokens against its
// k + 1 target rows, or, with k = 0, a plain row (its result is the sampler's own draw). Fields as in
// draft_verifier::verify.
template <logit_type T>
struct verify_row {
  const nucleus::sampler* sampler = nullptr;
  row_request request;
  logits_matrix<T> target;              // draft.size() + 1 rows
  std::span<const std::int32_t> draft;  // k tokens
  std::span<const float> draft_probs;   // empty or k * V
  std::span<row_result> out;            // k + 1 entries
  std::span<token_logprob> top = {};    // the bonus draw's top-n (a plain row's); may be empty
};

}  // namespace nucleus
