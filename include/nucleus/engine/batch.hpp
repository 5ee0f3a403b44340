// Batched sampling: a [B, V] row-major logits matrix, one sampler and request per row, per-row
// results; or a batch of verify_rows, where a request with a draft is verified (speculative.hpp)
// beside plain rows (k = 0). A row's result depends only on its own logits, sampler and request.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "nucleus/core/logit_types.hpp"
#include "nucleus/core/workspace.hpp"
#include "nucleus/engine/logits_matrix.hpp"
#include "nucleus/engine/sampler.hpp"
#include "nucleus/engine/speculative.hpp"
#include "nucleus/engine/thread_pool.hpp"

namespace nucleus {

struct batch_row {
  const nucleus::sampler* sampler = nullptr;
  row_request request;
};

class batch_sampler {
 public:
  batch_sampler() = default;
  // Pre-sizes one workspace per worker slot for rows of `vocab` logits.
  explicit batch_sampler(std::size_t vocab, std::size_t slots = 1) { reserve(vocab, slots); }

  void reserve(std::size_t vocab, std::size_t slots) {
    if (spaces_.size() < slots) {
      spaces_.resize(slots);
      verifiers_.resize(slots);
    }
    for (auto& ws : spaces_) {
      ws.reserve(vocab);
      ws.processed.ensure(vocab);
      ws.counts.ensure_zeroed(vocab);
    }
  }

  // out[r] = rows[r].sampler->sample(logits.row(r), ..., rows[r].request, top row r). Row r's top-n
  // goes to top[r * top_stride ..][0, min(logprobs, top_stride)). Shapes that disagree (rows vs
  // out vs logits.rows, stride < vocab, a null sampler, top too short) throw std::invalid_argument
  // before any row is touched. The first call on a new shape may allocate; later ones do not.
  template <logit_type T, class E = inline_executor>
  requires executor<std::remove_cvref_t<E>>
  void sample(const logits_matrix<T>& logits, std::span<const batch_row> rows, std::span<row_result> out,
              E&& ex = E{}, std::span<token_logprob> top = {}, std::size_t top_stride = 0) {
    check(logits, rows, out, top, top_stride);
    std::size_t keys = 0;
    for (const batch_row& r : rows) keys = std::max(keys, r.sampler->key_capacity(logits.vocab));
    prepare(ex.concurrency(), logits.vocab, keys, 0);
    ex.bulk(rows.size(), [&](std::size_t r, std::size_t slot) {
      const std::span<token_logprob> t = top_stride ? top.subspan(r * top_stride, top_stride) : top.first(0);
      out[r] = rows[r].sampler->sample(logits.row(r), spaces_[slot], rows[r].request, t);
    });
  }

  // Plain rows and speculative verification in one batch: results[r] = draft_verifier::verify on
  // rows[r] (its out and top get that call's entries); a row with no draft (k = 0) is a plain row,
  // whose out[0] and top are sampler::sample's. Each row's target is its own view, so rows may point
  // into one [sum of (k + 1), V] matrix or anywhere else, with different vocabularies. Shapes that
  // disagree (results vs rows, a null sampler, or any rule of draft_verifier::verify) throw
  // std::invalid_argument naming the row before any row is touched; bad tokens or probabilities are
  // that row's status, as in the single call. The first call on a new shape may allocate; later
  // ones do not.
  template <logit_type T, class E = inline_executor>
  requires executor<std::remove_cvref_t<E>>
  void sample(std::span<const verify_row<T>> rows, std::span<verify_result> results, E&& ex = E{}) {
    if (results.size() != rows.size()) fail("results.size() must equal rows.size()");
    std::size_t vocab = 0, keys = 0, history = 0;
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const verify_row<T>& row = rows[r];
      if (row.sampler == nullptr) fail(r, "no sampler");
      if (const char* e = detail::verify_shape_error(row.target, row.draft.size(), row.draft_probs.size(),
                                                     row.out.size()))
        fail(r, e);
      vocab = std::max(vocab, row.target.vocab);
      keys = std::max(keys, row.sampler->key_capacity(row.target.vocab));
      history = std::max(history, row.request.output.size() + row.draft.size());
    }
    prepare(ex.concurrency(), vocab, keys, history);
    ex.bulk(rows.size(), [&](std::size_t r, std::size_t slot) {
      const verify_row<T>& row = rows[r];
      results[r] = verifiers_[slot].verify(*row.sampler, row.target, row.draft, row.draft_probs,
                                           spaces_[slot], row.request, row.out, row.top);
    });
  }

 private:
  [[noreturn]] static void fail(const char* what) {
    throw std::invalid_argument(std::string("nucleus::batch_sampler: ") + what);
  }
  [[noreturn]] static void fail(std::size_t row, const char* what) {
    throw std::invalid_argument("nucleus::batch_sampler: row " + std::to_string(row) + ": " + what);
  }

  // Every buffer a row may need is sized here, on the calling thread: the tasks never allocate.
  void prepare(std::size_t slots, std::size_t vocab, std::size_t keys, std::size_t history) {
    if (slots == 0) fail("executor has no slots");
    reserve(vocab, slots);
    for (auto& ws : spaces_) ws.keys.ensure(keys);
    for (auto& v : verifiers_) v.reserve(history);
  }

  template <logit_type T>
  static void check(const logits_matrix<T>& m, std::span<const batch_row> rows, std::span<row_result> out,
                    std::span<token_logprob> top, std::size_t top_stride) {
    if (rows.size() != m.rows) fail("rows.size() must equal logits.rows");
    if (out.size() != m.rows) fail("out.size() must equal logits.rows");
    if (m.rows > 0 && m.data == nullptr) fail("logits.data is null");
    if (m.rows > 1 && m.stride < m.vocab) fail("logits.stride must be >= logits.vocab");
    if (top_stride != 0 && top.size() < m.rows * top_stride) fail("top must hold rows * top_stride entries");
    for (const batch_row& r : rows)
      if (r.sampler == nullptr) fail("a row has no sampler");
  }

  std::vector<workspace> spaces_;
  std::vector<draft_verifier> verifiers_;  // one per slot, beside spaces_: the verifications' history
};

// The verification call under its earlier name: batch_sampler::sample over verify_rows.
class batch_verifier {
 public:
  template <logit_type T, class E = inline_executor>
  requires executor<std::remove_cvref_t<E>>
  void verify(std::span<const verify_row<T>> rows, std::span<verify_result> results, E&& ex = E{}) {
    batch_.sample(rows, results, std::forward<E>(ex));
  }

 private:
  batch_sampler batch_;
};

}  // namespace nucleus
