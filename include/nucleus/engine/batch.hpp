// Batched sampling: a [B, V] row-major logits matrix, one sampler and request per row, per-row
// results. A row's result depends only on its own logits, sampler and request.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "nucleus/core/logit_types.hpp"
#include "nucleus/core/workspace.hpp"
#include "nucleus/engine/sampler.hpp"
#include "nucleus/engine/thread_pool.hpp"

namespace nucleus {

// Row r holds data[r * stride .. r * stride + vocab). stride >= vocab, in elements.
template <logit_type T>
struct logits_matrix {
  const T* data = nullptr;
  std::size_t rows = 0;
  std::size_t vocab = 0;
  std::size_t stride = 0;

  std::span<const T> row(std::size_t r) const noexcept { return {data + r * stride, vocab}; }
};

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
    if (spaces_.size() < slots) spaces_.resize(slots);
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
    const std::size_t slots = ex.concurrency();
    if (slots == 0) throw std::invalid_argument("nucleus::batch_sampler: executor has no slots");
    // Every buffer a row may need is sized here, on the calling thread: the tasks never allocate.
    std::size_t keys = 0;
    for (const batch_row& r : rows) keys = std::max(keys, r.sampler->key_capacity());
    reserve(logits.vocab, slots);
    for (auto& ws : spaces_) ws.keys.ensure(keys);
    ex.bulk(rows.size(), [&](std::size_t r, std::size_t slot) {
      const std::span<token_logprob> t = top_stride ? top.subspan(r * top_stride, top_stride) : top.first(0);
      out[r] = rows[r].sampler->sample(logits.row(r), spaces_[slot], rows[r].request, t);
    });
  }

 private:
  template <logit_type T>
  static void check(const logits_matrix<T>& m, std::span<const batch_row> rows, std::span<row_result> out,
                    std::span<token_logprob> top, std::size_t top_stride) {
    auto fail = [](const char* what) {
      throw std::invalid_argument(std::string("nucleus::batch_sampler: ") + what);
    };
    if (rows.size() != m.rows) fail("rows.size() must equal logits.rows");
    if (out.size() != m.rows) fail("out.size() must equal logits.rows");
    if (m.rows > 0 && m.data == nullptr) fail("logits.data is null");
    if (m.rows > 1 && m.stride < m.vocab) fail("logits.stride must be >= logits.vocab");
    if (top_stride != 0 && top.size() < m.rows * top_stride) fail("top must hold rows * top_stride entries");
    for (const batch_row& r : rows)
      if (r.sampler == nullptr) fail("a row has no sampler");
  }

  std::vector<workspace> spaces_;
};

}  // namespace nucleus
