// The CUDA backend of the GPU sampler's block primitives (nucleus/cuda/row_sampler.hpp): the threads
// of one block share a row. Element loops are strided by thread (coalesced reads); sums are exact
// 128-bit integers reduced through warp shuffles; histograms are shared-memory 64-bit atomics with
// the carries counted apart (so a bin holds the exact 128-bit weight); scan_find gives each thread
// a contiguous run of the index space, scans the runs' sums across the block, and lets the one
// thread whose run holds the point walk it. Every primitive ends in a barrier, so the next may reuse
// the shared memory.
#pragma once

#include <cstdint>

#include "nucleus/cuda/row_sampler.hpp"

namespace nucleus::cuda {

template <int Threads>
class cuda_block {
  static_assert(Threads % 32 == 0 && Threads >= 64 && Threads <= 1024,
                "a whole number of warps, at most 1024");
  static constexpr int warps = Threads / 32;
  using u64 = unsigned long long;
  using wsum = detail::wsum;

 public:
  struct storage {
    u64 hist_lo[detail::max_bins];
    u64 hist_hi[detail::max_bins];  // the carries out of hist_lo
    u64 part_lo[warps];
    u64 part_hi[warps];
    long long found_index;
    u64 found_lo, found_hi;
    u64 gather_keys[detail::max_gather];
    u64 gather_sorted[detail::max_gather];
    unsigned gather_count;
    double fold[detail::fold_lanes];
  };

  __device__ explicit cuda_block(storage& s) : s_(s) {}

  template <class F>
  __device__ std::uint64_t reduce_max(std::uint32_t n, F&& f) {
    u64 r = 0;
    for (std::uint32_t i = threadIdx.x; i < n; i += Threads) {
      const u64 v = f(i);
      r = v > r ? v : r;
    }
    for (int d = 16; d > 0; d >>= 1) {
      const u64 o = __shfl_xor_sync(0xffffffffu, r, d);
      r = o > r ? o : r;
    }
    if (lane() == 0) s_.part_lo[warp()] = r;
    __syncthreads();
    r = s_.part_lo[0];
    for (int w = 1; w < warps; ++w) r = s_.part_lo[w] > r ? s_.part_lo[w] : r;
    __syncthreads();
    return r;
  }

  template <class F>
  __device__ std::uint64_t reduce_min(std::uint32_t n, F&& f) {
    u64 r = ~u64{0};
    for (std::uint32_t i = threadIdx.x; i < n; i += Threads) {
      const u64 v = f(i);
      r = v < r ? v : r;
    }
    for (int d = 16; d > 0; d >>= 1) {
      const u64 o = __shfl_xor_sync(0xffffffffu, r, d);
      r = o < r ? o : r;
    }
    if (lane() == 0) s_.part_lo[warp()] = r;
    __syncthreads();
    r = s_.part_lo[0];
    for (int w = 1; w < warps; ++w) r = s_.part_lo[w] < r ? s_.part_lo[w] : r;
    __syncthreads();
    return r;
  }

  template <class F>
  __device__ wsum reduce_sum(std::uint32_t n, F&& f) {
    wsum r = 0;
    for (std::uint32_t i = threadIdx.x; i < n; i += Threads) r += f(i);
    for (int d = 16; d > 0; d >>= 1) r += shfl_xor(r, d);
    if (lane() == 0) put(warp(), r);
    __syncthreads();
    r = 0;
    for (int w = 0; w < warps; ++w) r += get(w);
    __syncthreads();
    return r;
  }

  template <class F>
  __device__ detail::found scan_find(std::uint32_t n, F&& f, wsum point) {
    const std::uint32_t run = (n + Threads - 1) / Threads;
    const std::uint32_t begin = min(threadIdx.x * run, n), end = min(begin + run, n);
    wsum local = 0;
    for (std::uint32_t i = begin; i < end; ++i) local += f(i);
    // Inclusive scan within the warp, then the warps' totals.
    wsum incl = local;
    for (int d = 1; d < 32; d <<= 1) {
      const wsum o = shfl_up(incl, d);
      if (lane() >= d) incl += o;
    }
    if (lane() == 31) put(warp(), incl);
    if (threadIdx.x == 0) s_.found_index = -1;
    __syncthreads();
    wsum before = incl - local, total = 0;
    for (int w = 0; w < warps; ++w) {
      const wsum t = get(w);
      if (w < warp()) before += t;
      total += t;
    }
    if (before <= point && point - before < local) {  // the one run that holds the point
      for (std::uint32_t i = begin; i < end; ++i) {
        const wsum w = f(i);
        if (point - before < w) {
          s_.found_index = i;
          s_.found_lo = static_cast<u64>(before);
          s_.found_hi = static_cast<u64>(before >> 64);
          break;
        }
        before += w;
      }
    }
    __syncthreads();
    detail::found r{s_.found_index, total};
    if (r.index >= 0) r.before = (static_cast<wsum>(s_.found_hi) << 64) | s_.found_lo;
    __syncthreads();
    return r;
  }

  template <class F>
  __device__ void histogram(std::uint32_t n, unsigned bins, F&& f) {
    for (unsigned j = threadIdx.x; j < bins; j += Threads) s_.hist_lo[j] = s_.hist_hi[j] = 0;
    __syncthreads();
    for (std::uint32_t i = threadIdx.x; i < n; i += Threads) {
      std::uint32_t bin = 0;
      std::uint64_t w = 0;
      if (f(i, bin, w) && w != 0) {
        const u64 old = atomicAdd(&s_.hist_lo[bin], static_cast<u64>(w));
        if (old + w < old) atomicAdd(&s_.hist_hi[bin], u64{1});  // this add wrapped: its carry
      }
    }
    __syncthreads();
  }
  __device__ wsum bin(std::uint32_t j) const {
    return (static_cast<wsum>(s_.hist_hi[j]) << 64) | s_.hist_lo[j];
  }

  // The nonzero f(i) in any order into shared memory, then each placed by its rank among them
  // (the keys are distinct), so the sorted list does not depend on which thread came first.
  template <class F>
  __device__ std::uint32_t gather(std::uint32_t n, F&& f) {
    if (threadIdx.x == 0) s_.gather_count = 0;
    __syncthreads();
    for (std::uint32_t i = threadIdx.x; i < n; i += Threads) {
      const u64 k = f(i);
      if (k == 0) continue;
      const unsigned at = atomicAdd(&s_.gather_count, 1u);
      if (at < detail::max_gather) s_.gather_keys[at] = k;
    }
    __syncthreads();
    const std::uint32_t c = min(s_.gather_count, detail::max_gather);
    for (std::uint32_t j = threadIdx.x; j < c; j += Threads) {
      const u64 k = s_.gather_keys[j];
      std::uint32_t rank = 0;
      for (std::uint32_t o = 0; o < c; ++o) rank += s_.gather_keys[o] > k ? 1 : 0;
      s_.gather_sorted[rank] = k;
    }
    __syncthreads();
    return c;
  }
  __device__ std::uint64_t gathered(std::uint32_t j) const { return s_.gather_sorted[j]; }

  template <class F>
  __device__ void for_each(std::uint32_t n, F&& f) {
    for (std::uint32_t i = threadIdx.x; i < n; i += Threads) f(i);
    __syncthreads();
  }
  __device__ static std::uint32_t fetch_or(std::uint32_t* p, std::uint32_t v) {
    return atomicOr(reinterpret_cast<unsigned*>(p), v);
  }
  __device__ static std::uint32_t fetch_add(std::uint32_t* p, std::uint32_t v) {
    return atomicAdd(reinterpret_cast<unsigned*>(p), v);
  }
  __device__ static std::uint32_t exchange(std::uint32_t* p, std::uint32_t v) {
    return atomicExch(reinterpret_cast<unsigned*>(p), v);
  }
  __device__ static bool leader() { return threadIdx.x == 0; }

  // One thread per lane walks its positions in order: the sums' rounding depends on it, so this
  // is a sequential pass (n / fold_lanes dependent adds), kept for the rows that ask for it.
  template <class F>
  __device__ void lane_fold(std::uint32_t n, double (&out)[detail::fold_lanes], F&& f) {
    if (threadIdx.x < detail::fold_lanes) {
      double acc = 0.0;
      for (std::uint32_t i = threadIdx.x; i < n; i += detail::fold_lanes) acc = f(i, acc);
      s_.fold[threadIdx.x] = acc;
    }
    __syncthreads();
    for (unsigned j = 0; j < detail::fold_lanes; ++j) out[j] = s_.fold[j];
    __syncthreads();
  }

 private:
  __device__ static int lane() { return static_cast<int>(threadIdx.x) & 31; }
  __device__ static int warp() { return static_cast<int>(threadIdx.x) >> 5; }
  __device__ static wsum shfl_xor(wsum v, int d) {
    const u64 lo = __shfl_xor_sync(0xffffffffu, static_cast<u64>(v), d);
    const u64 hi = __shfl_xor_sync(0xffffffffu, static_cast<u64>(v >> 64), d);
    return (static_cast<wsum>(hi) << 64) | lo;
  }
  __device__ static wsum shfl_up(wsum v, int d) {
    const u64 lo = __shfl_up_sync(0xffffffffu, static_cast<u64>(v), d);
    const u64 hi = __shfl_up_sync(0xffffffffu, static_cast<u64>(v >> 64), d);
    return (static_cast<wsum>(hi) << 64) | lo;
  }
  __device__ void put(int w, wsum v) {
    s_.part_lo[w] = static_cast<u64>(v);
    s_.part_hi[w] = static_cast<u64>(v >> 64);
  }
  __device__ wsum get(int w) const { return (static_cast<wsum>(s_.part_hi[w]) << 64) | s_.part_lo[w]; }

  storage& s_;
};

}  // namespace nucleus::cuda
