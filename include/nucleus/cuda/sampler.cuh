// The GPU sampler: one kernel launch samples B rows of V logits (float, bf16 or f16, rows `stride`
// elements apart) in device memory, each row with its own knobs (row_params, made on the host by
// make_row_params) and its own draw key (seed, position, stream) read from device arrays, so that a
// captured CUDA graph replays with new positions without new launch arguments. Each row gets the
// token, logprob and status nc::sampler gives for it (docs/cuda.md says what is checked where).
// Header-only CUDA C++, compiled by the consumer's nvcc (CMake target nucleus::cuda).
#pragma once

#if !defined(__CUDACC__)
#error "nucleus/cuda/sampler.cuh is CUDA C++: compile it with nvcc (nucleus/cuda/params.hpp is plain C++)"
#endif
#if defined(__USE_FAST_MATH__)
#error \
    "nucleus/cuda: --use_fast_math changes float arithmetic (flush to zero, approximate division); the sampler's bits need IEEE float"
#endif

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "nucleus/core/draw_key.hpp"
#include "nucleus/core/logit_types.hpp"
#include "nucleus/cuda/block.cuh"
#include "nucleus/cuda/row_params.hpp"
#include "nucleus/cuda/row_sampler.hpp"

namespace nucleus::cuda {

// One launch's arguments. Every pointer is device memory; every array has `rows` entries.
struct batch_view {
  const void* logits = nullptr;  // rows x stride elements of dtype
  logit_dtype dtype = logit_dtype::f32;
  std::uint32_t rows = 0;
  std::uint32_t vocab = 0;  // V: the logits of a row
  std::size_t stride = 0;   // elements from one row to the next (>= vocab)
  const row_params* params = nullptr;
  const std::uint64_t* seeds = nullptr;
  const std::uint64_t* positions = nullptr;
  const std::uint64_t* streams = nullptr;  // null: stream 0 for every row
  std::int32_t* tokens = nullptr;          // out: -1 unless the status is ok
  float* logprobs = nullptr;               // out, optional
  std::uint8_t* statuses = nullptr;        // out, optional: nucleus::status values

  // Logprobs (rows whose params ask for them, logprobs >= 0), all optional.
  std::int32_t* ranks = nullptr;        // out: rank (0 unless ok and logprobs >= 0)
  std::uint32_t* top_counts = nullptr;  // out: entries written to the row's top-n list
  std::int32_t* top_ids = nullptr;      // out: rows x top_n, the top-n lists
  float* top_logprobs = nullptr;        // out: rows x top_n
  std::uint32_t top_n = 0;              // entries per row in top_ids / top_logprobs (<= 64)

  // Request processors (rows whose params hold a list or a penalty, or whose inputs a bitmask).
  const std::uint32_t* lists = nullptr;  // the list arena make_row_params filled
  const row_inputs* inputs = nullptr;    // per row: bitmask, prompt, output (null: none)
  float* processed = nullptr;            // rows x vocab floats: scratch for the processed rows
  std::uint32_t* counts = nullptr;       // rows x vocab, all zero (the kernel leaves them zero):
                                         // the penalties' per-token counts

  // Mirostat (rows whose params have mirostat 1 or 2): each row's mu, read and updated in place by
  // the draw, as nc::sampler updates row_request::mirostat_mu (start: 2 * tau). The caller's memory.
  float* mirostat_mu = nullptr;
};

// Threads per row: 512 leaves each thread 128 registers for the 128-bit sums.
inline constexpr int default_threads = 512;

namespace detail {

template <class T, int Threads>
__global__ void __launch_bounds__(Threads) sample_rows(batch_view a) {
  __shared__ typename cuda_block<Threads>::storage shared;
  cuda_block<Threads> block(shared);
  const std::uint32_t r = blockIdx.x;
  const T* row = static_cast<const T*>(a.logits) + static_cast<std::size_t>(r) * a.stride;
  const draw_key key{a.seeds[r], a.positions[r], a.streams ? a.streams[r] : 0};
  const row_params p = a.params[r];
  const std::size_t at = static_cast<std::size_t>(r) * a.vocab;
  row_io io;
  io.lists = a.lists;
  if (a.inputs) io.inputs = a.inputs[r];
  io.processed = a.processed ? a.processed + at : nullptr;
  io.counts = a.counts ? a.counts + at : nullptr;
  io.top_ids = a.top_ids ? a.top_ids + static_cast<std::size_t>(r) * a.top_n : nullptr;
  io.top_logprobs = a.top_logprobs ? a.top_logprobs + static_cast<std::size_t>(r) * a.top_n : nullptr;
  io.top_capacity = a.top_n;
  io.mirostat_mu = a.mirostat_mu ? a.mirostat_mu + r : nullptr;
  const row_output o = sample_row(block, row, a.vocab, p, key, io);
  if (threadIdx.x == 0) {
    a.tokens[r] = o.token;
    if (a.logprobs) a.logprobs[r] = o.logprob;
    if (a.statuses) a.statuses[r] = static_cast<std::uint8_t>(o.status);
    if (a.ranks) a.ranks[r] = o.rank;
    if (a.top_counts) a.top_counts[r] = o.top_count;
  }
}

}  // namespace detail

// Launches the batch on `stream` (asynchronous, no allocation: capturable in a CUDA graph).
template <int Threads = default_threads>
cudaError_t sample_batch(const batch_view& a, cudaStream_t stream = nullptr) {
  if (a.rows == 0) return cudaSuccess;
  if (a.logits == nullptr || a.params == nullptr || a.seeds == nullptr || a.positions == nullptr ||
      a.tokens == nullptr || a.stride < a.vocab || a.top_n > detail::max_gather)
    return cudaErrorInvalidValue;
  const dim3 grid(a.rows), block(Threads);
  switch (a.dtype) {
    case logit_dtype::f32:
      detail::sample_rows<float, Threads><<<grid, block, 0, stream>>>(a);
      break;
    case logit_dtype::bf16:
      detail::sample_rows<bf16, Threads><<<grid, block, 0, stream>>>(a);
      break;
    case logit_dtype::f16:
      detail::sample_rows<f16, Threads><<<grid, block, 0, stream>>>(a);
      break;
  }
  return cudaGetLastError();
}

}  // namespace nucleus::cuda
