// The GPU sampler's per-row algorithm, written once over a block of cooperating threads. It reaches
// the row only through a handful of block-wide primitives, which two backends provide: CUDA threads
// sharing memory (nucleus/cuda/block.cuh, used by the kernels) and one host thread in order
// (nucleus/cuda/host_block.hpp, used by the CPU test that requires nc::sampler's bits). So the very
// algorithm that runs on the device is tested on any machine.
//
// The primitives, each called by every thread of the block with the same arguments and returning
// the same value to all of them (f is called once per index, in any order, on any thread):
//   reduce_max(n, f), reduce_min(n, f)  max / min of the uint64 f(i) over i in [0, n) (0 / ~0 if n = 0)
//   reduce_sum(n, f)                    the exact wsum of f(i)
//   scan_find(n, f, point)              the first i whose inclusive running sum of f exceeds point,
//                                       in index order, with the sum before it ({-1, total} if none)
//   histogram(n, bins, f) and bin(j)    bin(j) = the wsum of w over the i with f(i, bin, w) true and
//                                       bin == j
//   gather(n, f) and gathered(j)        the nonzero uint64 f(i) (at most max_gather of them), sorted
//                                       descending: gathered(0) is the largest; returns their count
//   for_each(n, f)                      f(i) for every i, then a barrier (the processors' passes)
//   fetch_or / fetch_add / exchange     atomic read-modify-writes of a uint32 in memory (the
//                                       penalties' per-token counts)
//   leader()                            true on one thread only: the one that writes list outputs
//   lane_fold(n, out, f)                out[j] = f applied in index order, acc = f(i, acc) from +0, over
//                                       the i < n with i % fold_lanes == j (top-n-sigma's double sums,
//                                       whose rounding depends on that order)
//
// The algorithm (docs/cuda.md). Every stage the GPU implements but typical keeps an interval of the
// candidates in rank order (logit descending, id ascending: rank_key): the truncations a prefix, xtc
// a suffix of that (it removes the top choices). typical keeps a prefix of its own order (distance
// from the entropy, then rank key): a band, tested as a predicate. So the candidate set is always
// "valid logits whose rank key is in [cut, top], within typical's band once it ran", a few numbers
// per row, and nothing is compacted or sorted. Mirostat replaces the stages with its own cut and
// updates the row's mu after the draw.
// A stage that needs the token at a rank position (top-k's k-th, top-p's crossing, min_keep's floor,
// the draw in rank order) finds it by radix selection over the ordered value bits: three histogram
// passes of 11, 11 and 10 bits, weighted by count or by the exact integer weights, then the tie
// among equal values by id. The arithmetic is simd/scalar.hpp's, shared with the CPU.
//
// What is not an algorithm choice but the CPU sampler's bookkeeping, reproduced because results
// depend on it: the candidate count the CPU sees (the row's length, NaN and -inf included, until the
// first cut), whether the candidates are in rank order (after a top-k that cut, the draw walks rank
// order, else id order), the +inf rule (a row holding +inf keeps just those, at logit 0), and the
// sign of a zero maximum.
//
// Around the stages: the request processors (process_row: mask, allowed / banned ids, EOS, bias,
// repetition / presence / frequency penalties, in engine/processors.hpp's order) write a float copy
// of the row that the stages read, and the logprobs (raw: log_softmax of the row as given; processed:
// the draw's distribution) add the token's logprob, its rank and the top-n list.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nucleus/core/draw_key.hpp"
#include "nucleus/core/host_device.hpp"
#include "nucleus/core/logit_types.hpp"
#include "nucleus/core/result.hpp"
#include "nucleus/cuda/row_params.hpp"
#include "nucleus/simd/scalar.hpp"

#if !defined(__CUDA_ARCH__)
#include <bit>
#include <cmath>
#endif

namespace nucleus::cuda {

// One row's result, as nc::sampler's row_result.
struct row_output {
  std::int32_t token = -1;      // -1 unless status == ok
  float logprob = 0.0f;         // logprobs = -1: the draw's own, in the processed distribution (0 when
                                // greedy); else in the row's logprobs mode
  std::int32_t rank = 0;        // 1 + tokens with a strictly larger logit there (0 unless ok and
                                // logprobs >= 0)
  std::uint32_t top_count = 0;  // entries written to the top-n list
  nucleus::status status = nucleus::status::ok;
};

// A row's memory besides its logits (any may be null where the row does not use it).
struct row_io {
  const std::uint32_t* lists = nullptr;  // the batch's list arena (row_params' list_refs)
  row_inputs inputs{};                   // the step's bitmask and histories
  float* processed = nullptr;            // vocab floats: the processed row (rows with processors)
  std::uint32_t* counts = nullptr;       // vocab counters, zero on entry and left zero (penalties)
  std::int32_t* top_ids = nullptr;       // top_capacity entries: the top-n list (logprobs > 0)
  float* top_logprobs = nullptr;
  std::uint32_t top_capacity = 0;  // entries written at most (as nc::sampler's top span's size)
  float* mirostat_mu = nullptr;    // the row's mu (mirostat rows): read, then updated by the draw
};

namespace detail {

using nucleus::detail::wsum;

// scan_find's answer.
struct found {
  std::int64_t index;  // -1: the point is at or past the total
  wsum before;         // the running sum before index
};

inline constexpr unsigned max_bins = 2048;
inline constexpr unsigned max_gather = 64;  // the top-n list's longest (sampling_params' max_logprobs)
inline constexpr int digit_passes = 3;
inline constexpr unsigned fold_lanes = 8;  // top-n-sigma's interleaved sums (simd/targets.hpp: partial_sums)
inline constexpr unsigned mirostat_tokens = 100;  // mirostat 1's m (stages/mirostat.hpp: mirostat_v1_tokens)
NUCLEUS_HD constexpr int digit_shift(int pass) noexcept {
  return pass == 0 ? 21 : pass == 1 ? 10 : 0;
}
NUCLEUS_HD constexpr int digit_width(int pass) noexcept {
  return pass == 2 ? 10 : 11;
}

NUCLEUS_HD inline double log_of(double z) noexcept {
#if defined(__CUDA_ARCH__)
  return ::log(z);  // CUDA's log: within 1 ulp of glibc's (docs/cuda.md)
#else
  return std::log(z);
#endif
}
// The other double functions the stages take: exp and pow (within an ulp or two of glibc's, as log),
// and the correctly rounded ones (sqrt, ceil, ldexp, fma, nextafter: the same bits everywhere).
NUCLEUS_HD inline double exp_of(double z) noexcept {
#if defined(__CUDA_ARCH__)
  return ::exp(z);
#else
  return std::exp(z);
#endif
}
NUCLEUS_HD inline double pow_of(double a, double b) noexcept {
#if defined(__CUDA_ARCH__)
  return ::pow(a, b);
#else
  return std::pow(a, b);
#endif
}
NUCLEUS_HD inline double sqrt_of(double z) noexcept {
#if defined(__CUDA_ARCH__)
  return ::sqrt(z);
#else
  return std::sqrt(z);
#endif
}
NUCLEUS_HD inline double ceil_of(double z) noexcept {
#if defined(__CUDA_ARCH__)
  return ::ceil(z);
#else
  return std::ceil(z);
#endif
}
NUCLEUS_HD inline double ldexp_of(double z, int e) noexcept {
#if defined(__CUDA_ARCH__)
  return ::ldexp(z, e);
#else
  return std::ldexp(z, e);
#endif
}
NUCLEUS_HD inline double fma_of(double a, double b, double c) noexcept {
#if defined(__CUDA_ARCH__)
  return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
// a + b * c with the product rounded first, as the CPU writes it (nvcc would contract it).
NUCLEUS_HD inline double add_product(double a, double b, double c) noexcept {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, __dmul_rn(b, c));
#else
  return a + b * c;
#endif
}
NUCLEUS_HD inline double exp2_of(double z) noexcept {
#if defined(__CUDA_ARCH__)
  return ::exp2(z);
#else
  return std::exp2(z);
#endif
}
// a - b * c with the product rounded first, as the CPU writes it.
NUCLEUS_HD inline double sub_product(double a, double b, double c) noexcept {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, __dmul_rn(b, c));
#else
  return a - b * c;
#endif
}
// std::log(2.0), the CPU's divisor for a surprise in bits: on the device its correctly rounded value.
NUCLEUS_HD inline double log_two() noexcept {
#if defined(__CUDA_ARCH__)
  return 0x1.62e42fefa39efp-1;
#else
  return std::log(2.0);
#endif
}
// Mirostat 1's log((i + 2) / (i + 1)), i < mirostat_tokens - 1: glibc's values, which the CPU stage
// computes (tests/cuda/host_equality.cpp checks them against the host's std::log).
NUCLEUS_HD inline double mirostat_log_ratio(unsigned i) noexcept {
  static constexpr double table[mirostat_tokens - 1] = {
      0x1.62e42fefa39efp-1, 0x1.9f323ecbf984cp-2, 0x1.269621134db91p-2, 0x1.c8ff7c79a9a22p-3,
      0x1.7565011e49675p-3, 0x1.3bb35a041d2abp-3, 0x1.1178e8227e47ap-3, 0x1.e27076e2af2e6p-4,
      0x1.af8e8210a4161p-4, 0x1.8663f793c46ccp-4, 0x1.64660aa8ce621p-4, 0x1.47dadcbbdba7ep-4,
      0x1.2f8bd74c5eaccp-4, 0x1.1a9844eb18eefp-4, 0x1.08598b59e3a06p-4, 0x1.f0a30c01162a6p-5,
      0x1.d43de1c448327p-5, 0x1.baeb2e6486987p-5, 0x1.a431d5bcc193p-5,  0x1.8fb063ef2c7fp-5,
      0x1.7d178b385c5abp-5, 0x1.6c261a4fb8a1bp-5, 0x1.5ca5fb01e4227p-5, 0x1.4e69ed6d80eb8p-5,
      0x1.414bcc0a3665dp-5, 0x1.352b344da70d2p-5, 0x1.29ec7a4b164dp-5,  0x1.1f77d4decfeebp-5,
      0x1.15b8b4f761f0ep-5, 0x1.0c9d3e1552fd7p-5, 0x1.0415d89e7444p-5,  0x1.f829b0e7833p-6,
      0x1.e91c671aa9245p-6, 0x1.daee8ab72e7c4p-6, 0x1.cd8d38d161e4dp-6, 0x1.c0e7a0853dd67p-6,
      0x1.b4eebc43cf575p-6, 0x1.a99516266171cp-6, 0x1.9ece955321b5p-6,  0x1.949052e1d202ep-6,
      0x1.8ad074fc86f92p-6, 0x1.81860f3577212p-6, 0x1.78a9073b4192ap-6, 0x1.7031fd3bab078p-6,
      0x1.681a3763c63afp-6, 0x1.605b90057255dp-6, 0x1.58f065fe55efdp-6, 0x1.51d38f0cf7155p-6,
      0x1.4b004bce0abf8p-6, 0x1.44723d272a7f6p-6, 0x1.3e255aed424acp-6, 0x1.3815eb9c9b0fap-6,
      0x1.32407cfeb307dp-6, 0x1.2ca1dd9f56cf6p-6, 0x1.273716f6d5cb5p-6, 0x1.21fd6832e0944p-6,
      0x1.1cf2418abf476p-6, 0x1.1813400e32b5cp-6, 0x1.135e29e09128bp-6, 0x1.0ed0ead398183p-6,
      0x1.0a6991570de03p-6, 0x1.06264bb3b303ep-6, 0x1.0205658935837p-6, 0x1.fc0a8b0fc03e4p-7,
      0x1.f448d6bf461fep-7, 0x1.ecc2dbbdb0de9p-7, 0x1.e575f277a16c1p-7, 0x1.de5f9b09903cdp-7,
      0x1.d77d7a64ccbfdp-7, 0x1.d0cd57b2b50a1p-7, 0x1.ca4d19f00ec09p-7, 0x1.c3fac5bb14e4bp-7,
      0x1.bdd47b4f66cbdp-7, 0x1.b7d874ab87fe2p-7, 0x1.b20503dc16b87p-7, 0x1.ac5891694532dp-7,
      0x1.a6d19ae37da79p-7, 0x1.a16eb18c693ccp-7, 0x1.9c2e7919da314p-7, 0x1.970fa69058c2bp-7,
      0x1.9210ff334b469p-7, 0x1.8d315788e39c9p-7, 0x1.886f92702a52bp-7, 0x1.83caa047a6adcp-7,
      0x1.7f417e2347947p-7, 0x1.7ad3351051731p-7, 0x1.767ed96631b4ep-7, 0x1.72438a2332d8bp-7,
      0x1.6e207054233b8p-7, 0x1.6a14be8615c78p-7, 0x1.661fb04176ae5p-7, 0x1.6240898dbf7b5p-7,
      0x1.5e76967d252e5p-7, 0x1.5ac12abfa9429p-7, 0x1.571fa13d02a3ap-7, 0x1.53915bb4dffdep-7,
      0x1.5015c2650e30bp-7, 0x1.4cac43b5182f4p-7, 0x1.495453e6fd4dcp-7};
  return table[i];
}
NUCLEUS_HD inline double abs_of(double z) noexcept {
#if defined(__CUDA_ARCH__)
  return ::fabs(z);
#else
  return std::fabs(z);
#endif
}
// A double's bits: for z >= 0 they order as z does.
NUCLEUS_HD inline std::uint64_t double_bits(double z) noexcept {
#if defined(__CUDA_ARCH__)
  return __builtin_bit_cast(std::uint64_t, z);
#else
  return std::bit_cast<std::uint64_t>(z);
#endif
}
NUCLEUS_HD inline double double_from_bits(std::uint64_t b) noexcept {
#if defined(__CUDA_ARCH__)
  return __builtin_bit_cast(double, b);
#else
  return std::bit_cast<double>(b);
#endif
}
NUCLEUS_HD inline float next_up(float f) noexcept {
#if defined(__CUDA_ARCH__)
  return ::nextafterf(f, nucleus::detail::inf());
#else
  return std::nextafter(f, nucleus::detail::inf());
#endif
}

// The rank key of the candidate at rank position `point` in rank order (logit descending, id
// ascending), positions weighted by count (weight null) or by weight(v): the first candidate whose
// inclusive running weight exceeds point; 0 when point is at or past the candidates' total.
// cand(i, v) says whether i is a candidate and gives its logit v.
template <class Block, class Cand, class Weight>
NUCLEUS_HD std::uint64_t select_rank(Block& b, std::uint32_t n, Cand&& cand, Weight&& weight, bool weighted,
                                     wsum point) {
  using namespace nucleus::detail;
  std::uint32_t prefix = 0;  // the ordered-value bits decided so far
  wsum before = 0;           // the weight of the candidates ranked above the prefix's values
  for (int pass = 0; pass < digit_passes; ++pass) {
    const int shift = digit_shift(pass), width = digit_width(pass);
    const unsigned bins = 1u << width;
    b.histogram(n, bins, [&](std::uint32_t i, std::uint32_t& bin, std::uint64_t& w) {
      float v;
      if (!cand(i, v)) return false;
      const std::uint32_t o = ordered(v);
      if (pass > 0 && (o >> (shift + width)) != prefix) return false;
      bin = (o >> shift) & (bins - 1);
      w = weighted ? weight(v) : 1;
      return true;
    });
    // The bins from the highest value down.
    const found f = b.scan_find(
        bins, [&](std::uint32_t j) -> wsum { return b.bin(bins - 1 - j); }, point - before);
    if (f.index < 0) return 0;  // the point is past the candidates' total
    prefix = (prefix << width) | (bins - 1 - static_cast<std::uint32_t>(f.index));
    before += f.before;
  }
  // Equal values weigh the same: the tie in rank (= id) order is found by counting.
  const float v = from_ordered(prefix);
  const std::uint64_t w = weighted ? weight(v) : 1;
  const wsum j = (point - before) / w;
  const found t = b.scan_find(
      n,
      [&](std::uint32_t i) -> wsum {
        float x;
        return cand(i, x) && ordered(x) == prefix ? 1 : 0;
      },
      j);
  if (t.index < 0) return 0;
  return rank_key(v, static_cast<std::int32_t>(t.index));
}

// The k (<= max_gather) highest candidates' rank keys into b.gathered(0..count), largest first.
template <class Block, class Cand>
NUCLEUS_HD std::uint32_t top_keys(Block& b, std::uint32_t n, Cand&& cand, std::uint32_t k) {
  using namespace nucleus::detail;
  if (k == 0) return 0;
  if (k > max_gather) k = max_gather;
  // The k-th key (0: fewer than k candidates, all kept): rank keys are distinct, so exactly the
  // keys at or above it.
  const std::uint64_t lo = select_rank(
      b, n, cand, [](float) -> std::uint64_t { return 1; }, false, k - 1);
  return b.gather(n, [&](std::uint32_t i) -> std::uint64_t {
    float v;
    if (!cand(i, v)) return 0;
    const std::uint64_t key = rank_key(v, static_cast<std::int32_t>(i));
    return key >= lo ? key : 0;
  });
}

// The top-n entries a row writes at most: logprobs, as far as its list has room (nc::sampler's
// min(top_n(), top.size())).
NUCLEUS_HD inline std::uint32_t top_count_for(const row_params& p, const row_io& io) noexcept {
  if (p.logprobs <= 0 || io.top_ids == nullptr || io.top_logprobs == nullptr) return 0;
  const auto n = static_cast<std::uint32_t>(p.logprobs);
  return n < io.top_capacity ? n : io.top_capacity;
}

// A row of V logits in device (or host) memory.
template <class T>
struct row_ref {
  const T* x;
  std::uint32_t n;
};

template <class Block, class T>
class row_sampler {
 public:
  NUCLEUS_HD row_sampler(Block& b, row_ref<T> row) : b_(b), x_(row.x), v_(row.n), n_(row.n) {}

  NUCLEUS_HD row_output run(const row_params& p, draw_key key, const row_io& io) {
    row_output o = stages_and_draw(p, key, io);
    if (o.status == nucleus::status::ok && p.logprobs >= 0 && !p.raw_logprobs) processed_logprobs(p, io, o);
    return o;
  }

 private:
  NUCLEUS_HD row_output stages_and_draw(const row_params& p, draw_key key, const row_io& io) {
    if (v_ == 0) return fail_with(nucleus::status::empty_row);
    // Read by every thread before the draw's reductions, after which the leader writes it.
    const float mu = p.mirostat != 0 ? *io.mirostat_mu : 0.0f;
    for (int k = 0; k < max_gpu_stages; ++k) {
      if (!live() || greedy_) continue;  // as the chain: nothing to cut, or T = 0 already
      switch (p.stages[k]) {
        case gpu_stage::temperature:
          temperature(p);
          break;
        case gpu_stage::dynamic_temperature:
          dynamic_temperature(p);
          break;
        case gpu_stage::top_n_sigma:
          top_n_sigma(p);
          break;
        case gpu_stage::epsilon_cutoff:
          epsilon_cutoff(p);
          break;
        case gpu_stage::eta_cutoff:
          eta_cutoff(p);
          break;
        case gpu_stage::xtc:
          xtc(p, key);
          break;
        case gpu_stage::top_k:
          top_k(p);
          break;
        case gpu_stage::top_p:
          top_p(p);
          break;
        case gpu_stage::min_p:
          min_p(p);
          break;
        case gpu_stage::typical:
          typical(p);
          break;
        case gpu_stage::none:
          break;
      }
    }
    if (p.mirostat == 0) return greedy_ ? greedy_pick() : draw(key);
    if (p.mirostat == 1) mirostat_v1(mu);
    if (p.mirostat == 2) mirostat_v2(mu);
    const row_output o = greedy_ ? greedy_pick() : draw(key);
    // mu <- mu - eta (surprise - tau), the surprise -logprob in bits (stages/mirostat.hpp: mirostat_draw).
    if (o.status == nucleus::status::ok && b_.leader()) {
      const double surprise = -static_cast<double>(o.logprob) / log_two();
      *io.mirostat_mu =
          static_cast<float>(sub_product(static_cast<double>(mu), static_cast<double>(p.mirostat_eta),
                                         surprise - static_cast<double>(p.mirostat_tau)));
    }
    return o;
  }

  // The token's place in the distribution the draw used, and its top-n (sampler.hpp,
  // processed_logprobs): the rank among the candidates, the top-n by the draw's own formula.
  NUCLEUS_HD void processed_logprobs(const row_params& p, const row_io& io, row_output& o) {
    using namespace nucleus::detail;
    const std::uint32_t n = top_count_for(p, io);
    if (greedy_) {
      o.rank = 1;
      if (n > 0) {
        if (b_.leader()) {
          io.top_ids[0] = o.token;
          io.top_logprobs[0] = 0.0f;
        }
        o.top_count = 1;
      }
      return;
    }
    float xt = max_;
    value_of(static_cast<std::uint32_t>(o.token), xt);
    o.rank = 1 + static_cast<std::int32_t>(b_.reduce_sum(v_, [&](std::uint32_t i) -> std::uint64_t {
               float v;
               return value_of(i, v) && v > xt ? 1 : 0;
             }));
    if (n == 0) return;
    const double log_z = log_of(to_double(total_));  // the draw's normalizer
    const std::uint32_t c = top_keys(
        b_, v_, [&](std::uint32_t i, float& v) { return value_of(i, v); }, n);
    if (b_.leader())
      for (std::uint32_t j = 0; j < c; ++j) {
        const std::uint64_t k = b_.gathered(j);
        io.top_ids[j] = key_id(k);
        io.top_logprobs[j] =
            static_cast<float>(static_cast<double>(scaled(key_value(k), max_, inv_)) - log_z);
      }
    o.top_count = c;
  }

  // --- the candidate set ----------------------------------------------------------------------
  NUCLEUS_HD bool live() const noexcept { return status_ == nucleus::status::ok && n_ > 0; }

  // Whether token i is a candidate, and its logit as the CPU's candidate list holds it.
  NUCLEUS_HD bool value_of(std::uint32_t i, float& v) const noexcept {
    using nucleus::detail::inf;
    const float raw = to_float(x_[i]);
    if (!(raw > -inf())) return false;  // NaN and -inf are never candidates
    if (inf_mode_) {
      if (!(raw == inf())) return false;
      v = 0.0f;
    } else {
      v = normalized_ && raw == 0.0f ? 0.0f : raw;  // top-k's list holds rank keys' values: +0
    }
    const std::uint64_t k = nucleus::detail::rank_key(v, static_cast<std::int32_t>(i));
    if (!(k >= cut_ && k <= top_)) return false;
    if (!typical_on_) return true;
    const double d = typical_distance(v);  // typical's band: at or before its last kept (distance, key)
    return d < typical_dist_ || (d == typical_dist_ && k >= typical_key_);
  }
  // stages/typical.hpp's ranking key, |y - E[y]| at the maximum, 1/T and mean the stage saw.
  NUCLEUS_HD double typical_distance(float v) const noexcept {
    return abs_of(static_cast<double>(nucleus::detail::scaled(v, typical_max_, typical_inv_)) -
                  typical_mean_);
  }
  NUCLEUS_HD std::uint64_t weight_of(float v) const noexcept {
    using namespace nucleus::detail;
    return weight(exp_scalar(scaled(v, max_, inv_)));
  }
  NUCLEUS_HD std::uint32_t count_alive() {
    return static_cast<std::uint32_t>(b_.reduce_sum(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      return value_of(i, v) ? 1 : 0;
    }));
  }
  NUCLEUS_HD wsum total_weight() {
    return b_.reduce_sum(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      return value_of(i, v) ? weight_of(v) : 0;
    });
  }
  // The candidates as the CPU counts them (min_keep.hpp: candidate_count): a dense row's NaN and -inf
  // are not.
  NUCLEUS_HD std::uint32_t candidate_count() { return dense_ ? count_alive() : n_; }
  // After a cut: the CPU's list is compacted (its count is the candidates'), its maximum kept.
  NUCLEUS_HD void cut_to(std::uint64_t cut) {
    cut_ = cut;
    dense_ = false;
    n_ = count_alive();
    max_stale_ = true;
  }

  // The maximum, as row_state::max_logit(): no candidate -> no_candidates; a +inf maximum keeps the
  // +inf tokens only, at logit 0. Stages only cut below the maximum, so its value never changes;
  // the sign of a zero maximum follows the candidates the CPU scans (docs/cuda.md).
  NUCLEUS_HD void ensure_max() {
    using namespace nucleus::detail;
    if (has_max_ && !(max_ == 0.0f && max_stale_)) return;
    const std::uint64_t top = b_.reduce_max(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      if (!value_of(i, v)) return 0;
      return (std::uint64_t{ordered(v)} << 1) | (bits_of(v) == 0 ? 1u : 0u);  // +0 over -0
    });
    max_stale_ = false;
    if (top == 0) {
      status_ = nucleus::status::no_candidates;
      n_ = 0;
      return;
    }
    float m = from_ordered(static_cast<std::uint32_t>(top >> 1));
    if (m == 0.0f) m = top & 1 ? 0.0f : -0.0f;
    if (!has_max_ && m == inf()) {
      // The cut so far, if any, is among the +inf tokens (a rank key of logit 0 now) or below them.
      cut_ = cut_ != 0 && key_value(cut_) == inf() ? rank_key(0.0f, key_id(cut_)) : 0;
      inf_mode_ = true;
      dense_ = false;
      n_ = count_alive();
      m = 0.0f;
    }
    max_ = m;
    has_max_ = true;
  }

  // --- rank selection -------------------------------------------------------------------------
  // The rank key of the candidate at rank position `point` in rank order, positions weighted by
  // count or by weight: the first candidate whose inclusive running weight exceeds point (< total).
  NUCLEUS_HD std::uint64_t rank_select(wsum point, bool weighted) {
    return select_rank(
        b_, v_, [&](std::uint32_t i, float& v) { return value_of(i, v); },
        [&](float v) { return weight_of(v); }, weighted, point);
  }

  // min_keep_floor (stages/min_keep.hpp): the rank key of the min_keep-th candidate, or 0 when the
  // floor keeps everything.
  NUCLEUS_HD std::uint64_t min_keep_floor(std::uint32_t min_keep) {
    if (min_keep >= n_) return 0;
    const std::uint32_t count = dense_ ? count_alive() : n_;
    if (count < min_keep) return 0;
    return rank_select(min_keep - 1, false);
  }

  // The cut "keep the candidates whose logit is at least v" (keep_scaled_at_least(0, 1, v)): a prefix.
  NUCLEUS_HD void keep_at_least(float v) {
    const std::uint64_t cut = std::uint64_t{nucleus::detail::ordered(v)} << 32;
    cut_to(cut > cut_ ? cut : cut_);
  }

  // row_stats.hpp's moments: the exact weight total and the mean scaled logit, sum(w * trunc(-y 2^40))
  // / total, from add_moment's integers. The products reach 2^95, so they add in 24-bit pieces (as
  // kernels/reduce.hpp: moment_sums): w = wh 2^24 + wl, q = qh 2^24 + ql, each product below 2^49.
  struct moments_of_row {
    wsum total = 0;
    double mean_y = 0.0;
  };
  NUCLEUS_HD moments_of_row moments() {
    using namespace nucleus::detail;
    constexpr std::uint64_t low = (std::uint64_t{1} << 24) - 1;
    auto parts = [&](std::uint32_t i, std::uint64_t& w, std::uint64_t& q) {
      float v;
      if (!value_of(i, v)) return false;
      const float y = scaled(v, max_, inv_);
      w = weight(exp_scalar(y));
      q = w != 0 ? static_cast<std::uint64_t>(-static_cast<double>(y) * 0x1p40) : 0;
      return true;
    };
    auto sum_of = [&](auto piece) {
      return b_.reduce_sum(v_, [&](std::uint32_t i) -> std::uint64_t {
        std::uint64_t w = 0, q = 0;
        return parts(i, w, q) ? piece(w, q) : 0;
      });
    };
    moments_of_row r;
    r.total = sum_of([](std::uint64_t w, std::uint64_t) { return w; });
    const wsum s48 = sum_of([](std::uint64_t w, std::uint64_t q) { return (w >> 24) * (q >> 24); });
    const wsum s24 = sum_of(
        [](std::uint64_t w, std::uint64_t q) { return (w >> 24) * (q & low) + (w & low) * (q >> 24); });
    const wsum s0 = sum_of([](std::uint64_t w, std::uint64_t q) { return (w & low) * (q & low); });
    const wsum weighted = (s48 << 48) + (s24 << 24) + s0;
    if (r.total != 0) r.mean_y = ldexp_of(-static_cast<double>(weighted) / static_cast<double>(r.total), -40);
    return r;
  }

  // The weight cuts' shared rule (min_keep.hpp: weight_cut_floored, then row_stats.hpp:
  // keep_weight_at_least): keep what weighs at least w_min, and always the maximum; with a floor,
  // the logits at or above the min_keep-th's when the cut would take it.
  NUCLEUS_HD void weight_cut(std::uint32_t min_keep, double w_min) {
    using namespace nucleus::detail;
    const double e_min = ceil_of(w_min) * weight_ulp;  // weight(e) >= w_min  <=>  e >= e_min
    if (min_keep > 1) {
      const std::uint64_t floor = min_keep_floor(min_keep);
      if (floor == 0) return;
      const float kv = key_value(floor);
      if (!(static_cast<double>(exp_scalar(scaled(kv, max_, inv_))) >= e_min)) {
        keep_at_least(kv);
        return;
      }
    }
    // A weight only grows with the logit: the least qualifying logit is the cut.
    const std::uint64_t least = b_.reduce_min(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      if (!value_of(i, v) || !(static_cast<double>(exp_scalar(scaled(v, max_, inv_))) >= e_min))
        return ~std::uint64_t{0};
      return ordered(v);
    });
    const std::uint32_t top = ordered(max_);
    keep_at_least(from_ordered(least < top ? static_cast<std::uint32_t>(least) : top));
  }

  // --- the stages -----------------------------------------------------------------------------
  NUCLEUS_HD void temperature(const row_params& p) {
    if (p.greedy) {
      greedy_ = true;
    } else {
      inv_ = p.inv_temperature;
    }
  }

  // stages/dynamic_temperature.hpp (range > 0): the temperature from the candidates' entropy.
  NUCLEUS_HD void dynamic_temperature(const row_params& p) {
    ensure_max();
    if (!live()) return;
    const std::uint32_t n = candidate_count();
    if (n < 2) return;  // left as it is: not even t applies
    const double t = static_cast<double>(p.temperature), range = static_cast<double>(p.dynatemp_range);
    const double lo = 0.0 < t - range ? t - range : 0.0;
    const double hi = t + range;
    const moments_of_row mo = moments();
    const double entropy = log_of(nucleus::detail::to_double(mo.total)) - mo.mean_y;
    double h = entropy / log_of(static_cast<double>(n));
    h = h < 0.0 ? 0.0 : 1.0 < h ? 1.0 : h;  // std::clamp
    const float dyn =
        static_cast<float>(add_product(lo, hi - lo, pow_of(h, static_cast<double>(p.dynatemp_exponent))));
    if (dyn == 0.0f) {
      greedy_ = true;
      return;
    }
    inv_ *= 1.0f / dyn;  // row_state::scale_inv_temperature
    if (!(inv_ <= 0x1.fffffep127f)) greedy_ = true;
  }

  // stages/top_n_sigma.hpp: keep x >= max - n * sigma, sigma the candidates' population standard
  // deviation, summed as the CPU sums it (eight interleaved double sums over the list's positions,
  // in index order; the list is the dense row here, or a +inf row's tokens, all at 0).
  NUCLEUS_HD void top_n_sigma(const row_params& p) {
    using namespace nucleus::detail;
    if (p.top_n_sigma <= 0.0f) return;
    ensure_max();
    if (!live() || n_ == 1) return;
    const float mx = max_;
    const std::uint32_t count = count_alive();
    double part[fold_lanes];
    b_.lane_fold(v_, part, [&](std::uint32_t i, double acc) {
      float v;
      return acc + (value_of(i, v) ? static_cast<double>(v) : 0.0);
    });
    double total = 0.0;
    for (double x : part) total += x;
    const double mean = total / static_cast<double>(count);
    b_.lane_fold(v_, part, [&](std::uint32_t i, double acc) {
      float v;
      const double d = value_of(i, v) ? static_cast<double>(v) - mean : 0.0;
      return fma_of(d, d, acc);
    });
    double squares = 0.0;
    for (double x : part) squares += x;
    const double sigma = sqrt_of(squares / static_cast<double>(count));
    const double t = add_product(static_cast<double>(mx), -static_cast<double>(p.top_n_sigma), sigma);
    float f = static_cast<float>(t);  // the least float >= t
    if (static_cast<double>(f) < t) f = next_up(f);
    if (f < -0x1.fffffep127f) f = -0x1.fffffep127f;
    if (!(f == f)) {  // (unreachable for float rows: the sums stay finite in double) nothing passes
      cut_to(~std::uint64_t{0});
      return;
    }
    keep_at_least(f);
  }

  NUCLEUS_HD void top_k(const row_params& p) {
    if (p.top_k <= 0) return;
    top_k_of(static_cast<std::uint32_t>(p.top_k), p.keep_ties != 0);
  }
  NUCLEUS_HD void top_k_of(std::uint32_t k, bool keep_ties) {
    if (k >= n_) return;  // keeps all (the CPU's count: V while dense)
    const std::uint32_t count = dense_ ? count_alive() : n_;
    std::uint64_t cut = cut_;
    if (count >= k) {
      const std::uint64_t kth = rank_select(k - 1, false);
      cut = keep_ties ? std::uint64_t{nucleus::detail::ordered(nucleus::detail::key_value(kth))} << 32 : kth;
      if (cut < cut_) cut = cut_;
    }
    sorted_ = true;
    normalized_ = true;
    cut_to(cut);
  }

  NUCLEUS_HD void top_p(const row_params& p) {
    using namespace nucleus::detail;
    if (p.top_p >= 1.0f) return;
    ensure_max();
    if (!live() || n_ == 1) return;
    std::uint64_t floor = ~std::uint64_t{0};
    if (p.min_keep > 1) {
      floor = min_keep_floor(p.min_keep);
      if (floor == 0) return;
    }
    const wsum bound = mass_bound(p.top_p, total_weight());  // >= 1: the maximum weighs 2^48
    const std::uint64_t crossing = rank_select(bound - 1, true);
    cut_to(crossing < floor ? crossing : floor);
  }

  NUCLEUS_HD void min_p(const row_params& p) {
    using namespace nucleus::detail;
    if (p.min_p <= 0.0f) return;
    ensure_max();
    if (!live()) return;
    const float threshold = p.log_min_p;
    if (p.min_keep > 1) {
      const std::uint64_t floor = min_keep_floor(p.min_keep);
      if (floor == 0) return;
      if (!(scaled(key_value(floor), max_, inv_) >= threshold)) {
        cut_to(floor);
        return;
      }
    }
    // p >= min_p * p_max is a logit threshold, so the kept set is a rank prefix: its last key.
    const std::uint64_t last = b_.reduce_min(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      if (!value_of(i, v) || !(scaled(v, max_, inv_) >= threshold)) return ~std::uint64_t{0};
      return rank_key(v, static_cast<std::int32_t>(i));
    });
    cut_to(last);
  }

  // stages/epsilon_cutoff.hpp: keep p >= e, on the exact weights.
  NUCLEUS_HD void epsilon_cutoff(const row_params& p) {
    if (p.epsilon_cutoff <= 0.0f) return;
    ensure_max();
    if (!live() || n_ == 1) return;
    weight_cut(p.min_keep, static_cast<double>(p.epsilon_cutoff) * static_cast<double>(total_weight()));
  }

  // stages/eta_cutoff.hpp: keep p >= min(eta, sqrt(eta) exp(-H)).
  NUCLEUS_HD void eta_cutoff(const row_params& p) {
    using namespace nucleus::detail;
    if (p.eta_cutoff <= 0.0f) return;
    ensure_max();
    if (!live() || n_ == 1) return;
    const moments_of_row mo = moments();
    const double eta = static_cast<double>(p.eta_cutoff);
    const double by_eta = eta * to_double(mo.total) * weight_of_one;
    const double by_entropy = sqrt_of(eta) * exp_of(mo.mean_y) * weight_of_one;
    weight_cut(p.min_keep, by_entropy < by_eta ? by_entropy : by_eta);  // std::min
  }

  // stages/xtc.hpp: with the key's xtc coin, drop every token at or above the threshold but the least
  // likely of them: the candidates ranked at or below it, a suffix (the maximum moves).
  NUCLEUS_HD void xtc(const row_params& p, draw_key key) {
    using namespace nucleus::detail;
    if (p.xtc_probability <= 0.0f || p.xtc_threshold > 0.5f) return;
    ensure_max();
    if (!live() || n_ < 2) return;
    if (!(uniform(key, key_stream::xtc) < static_cast<double>(p.xtc_probability))) return;
    const double e_min =
        ceil_of(static_cast<double>(p.xtc_threshold) * static_cast<double>(total_weight())) * weight_ulp;
    auto reaches = [&](std::uint32_t i, float& v) {
      return value_of(i, v) && static_cast<double>(exp_scalar(scaled(v, max_, inv_))) >= e_min;
    };
    const auto above = static_cast<std::uint32_t>(b_.reduce_sum(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      return reaches(i, v) ? 1 : 0;
    }));
    if (above < 2) return;
    if (p.min_keep > 1 && candidate_count() - (above - 1) < p.min_keep) return;  // all or nothing
    top_ = b_.reduce_min(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      return reaches(i, v) ? rank_key(v, static_cast<std::int32_t>(i)) : ~std::uint64_t{0};
    });
    dense_ = false;
    n_ = count_alive();
    has_max_ = false;  // the top choices went: the maximum is taken again
  }

  // stages/typical.hpp: the candidates in the order (distance |y - E[y]| ascending, logit descending,
  // id ascending), kept up to the one where the running mass reaches p, and at least the first
  // min_keep. A prefix of that order, so the kept set is "(distance, rank key) at or before the last
  // kept one's": a predicate in value_of, not a rank interval. The CPU leaves its list in its order
  // (rank order stays rank order) and its maximum to be taken again.
  NUCLEUS_HD void typical(const row_params& p) {
    using namespace nucleus::detail;
    if (p.typical_p >= 1.0f) return;
    ensure_max();
    if (!live() || n_ == 1) return;
    if (dense_) keep_at_least(-0x1.fffffep127f);  // the CPU drops NaN and -inf first
    if (p.min_keep > 1 && p.min_keep >= n_) return;
    const moments_of_row mo = moments();
    typical_max_ = max_;
    typical_inv_ = inv_;
    typical_mean_ = mo.mean_y;
    typical_point last = typical_select(mass_bound(p.typical_p, mo.total) - 1, true);
    if (p.min_keep > 1) {
      const typical_point floor = typical_select(p.min_keep - 1, false);
      if (floor.dist > last.dist || (floor.dist == last.dist && floor.key < last.key)) last = floor;
    }
    if (last.key == 0) return;  // unreachable: the bound is at most the total, min_keep below the count
    typical_dist_ = last.dist;
    typical_key_ = last.key;
    typical_on_ = true;
    n_ = count_alive();
    has_max_ = false;  // the maximum may be gone: taken again
  }

  // The candidate at position `point` in typical's order, positions weighted by count or weight:
  // radix selection over the distance's 64 bits (five passes of 11 bits, one of 9), then the one
  // among that distance's candidates in rank order. {0, 0} when point is past the total.
  struct typical_point {
    double dist = 0.0;
    std::uint64_t key = 0;
  };
  NUCLEUS_HD typical_point typical_select(wsum point, bool weighted) {
    std::uint64_t prefix = 0;
    wsum before = 0;
    for (int pass = 0; pass < 6; ++pass) {
      const int shift = pass < 5 ? 53 - 11 * pass : 0, width = pass < 5 ? 11 : 9;
      const unsigned bins = 1u << width;
      b_.histogram(v_, bins, [&](std::uint32_t i, std::uint32_t& bin, std::uint64_t& w) {
        float v;
        if (!value_of(i, v)) return false;
        const std::uint64_t d = double_bits(typical_distance(v));
        if (pass > 0 && (d >> (shift + width)) != prefix) return false;
        bin = static_cast<std::uint32_t>(d >> shift) & (bins - 1);
        w = weighted ? weight_of(v) : 1;
        return true;
      });
      const found f = b_.scan_find(
          bins, [&](std::uint32_t j) -> wsum { return b_.bin(j); }, point - before);
      if (f.index < 0) return {};
      prefix = (prefix << width) | static_cast<std::uint64_t>(f.index);
      before += f.before;
    }
    typical_point r;
    r.dist = double_from_bits(prefix);
    r.key = select_rank(
        b_, v_,
        [&](std::uint32_t i, float& v) {
          return value_of(i, v) && double_bits(typical_distance(v)) == prefix;
        },
        [&](float v) { return weight_of(v); }, weighted, point - before);
    return r;
  }

  // stages/mirostat.hpp, v2: keep the tokens with -log2 p <= mu (w >= total 2^-mu), or the most likely
  // alone when not even it qualifies.
  NUCLEUS_HD void mirostat_v2(float mu) {
    using namespace nucleus::detail;
    ensure_max();
    if (!live() || greedy_) return;
    const double w_min = exp2_of(-static_cast<double>(mu)) * static_cast<double>(total_weight());
    if (!(weight_of_one >= w_min)) {
      top_k_of(1, false);
      return;
    }
    weight_cut(1, w_min);
  }

  // stages/mirostat.hpp, v1: the Zipf exponent from the top m candidates (in rank order, m = 100:
  // gathered 64 at a time), then the top k it asks for, V the row's length.
  NUCLEUS_HD void mirostat_v1(float mu) {
    using namespace nucleus::detail;
    ensure_max();
    if (!live() || greedy_ || n_ < 2) return;
    const std::uint32_t take = n_ < mirostat_tokens ? n_ : mirostat_tokens;
    double sum_tb = 0.0, sum_tt = 0.0, prev = 0.0;
    std::uint32_t got = 0;
    std::uint64_t below = ~std::uint64_t{0};  // the chunks so far took the keys above this
    while (got < take) {
      const std::uint32_t want = take - got < max_gather ? take - got : max_gather;
      const std::uint32_t c = top_keys(
          b_, v_,
          [&](std::uint32_t i, float& v) {
            return value_of(i, v) && rank_key(v, static_cast<std::int32_t>(i)) < below;
          },
          want);
      for (std::uint32_t j = 0; j < c; ++j) {
        const double y = static_cast<double>(scaled(key_value(b_.gathered(j)), max_, inv_));
        if (got + j > 0) {  // log(p_i / p_(i+1)): the pair ending at position got + j
          const double t = mirostat_log_ratio(got + j - 1);
          sum_tb = fma_of(t, prev - y, sum_tb);
          sum_tt = fma_of(t, t, sum_tt);
        }
        prev = y;
      }
      if (c < want) break;  // fewer candidates than m
      below = b_.gathered(c - 1);
      got += c;
    }
    const double s_hat = sum_tb / sum_tt;
    const double e_hat = s_hat - 1.0;
    const double k =
        pow_of(e_hat * exp2_of(static_cast<double>(mu)) / (1.0 - pow_of(static_cast<double>(v_), -e_hat)),
               1.0 / s_hat);
    if (!(k < static_cast<double>(n_))) return;  // the whole row (also NaN): top-k keeps all
    top_k_of(k >= 1.0 ? static_cast<std::uint32_t>(k) : 1u, false);
  }

  // --- the terminals --------------------------------------------------------------------------
  NUCLEUS_HD static row_output fail_with(nucleus::status s) noexcept {
    row_output o;
    o.status = s;
    return o;
  }
  NUCLEUS_HD row_output fail() const noexcept {
    return fail_with(status_ == nucleus::status::ok ? nucleus::status::no_candidates : status_);
  }
  NUCLEUS_HD static row_output drawn(std::int32_t token, float logprob) noexcept {
    row_output o;
    o.token = token;
    o.logprob = logprob;
    return o;
  }

  // The highest candidate, ties to the lowest id: the largest rank key.
  NUCLEUS_HD row_output greedy_pick() {
    if (!live()) return fail();
    const std::uint64_t top = b_.reduce_max(v_, [&](std::uint32_t i) -> std::uint64_t {
      float v;
      return value_of(i, v) ? nucleus::detail::rank_key(v, static_cast<std::int32_t>(i)) : 0;
    });
    if (top == 0) {
      status_ = nucleus::status::no_candidates;
      return fail();
    }
    return drawn(nucleus::detail::key_id(top), 0.0f);
  }

  // The categorical draw (stages/categorical.hpp): the point floor(u * total) in the exact weights,
  // located in the candidates' order: rank order after a top-k that cut, else id order.
  NUCLEUS_HD row_output draw(draw_key key) {
    using namespace nucleus::detail;
    ensure_max();
    if (!live()) return fail();
    const wsum total = total_weight();
    total_ = total;
    const wsum point = draw_point(key, total);
    std::int64_t at = -1;
    if (sorted_) {
      const std::uint64_t k = rank_select(point, true);
      if (k != 0) at = key_id(k);
    } else {
      at = b_.scan_find(
                 v_,
                 [&](std::uint32_t i) -> wsum {
                   float v;
                   return value_of(i, v) ? weight_of(v) : 0;
                 },
                 point)
               .index;
    }
    float v = 0.0f;
    if (at < 0 || !value_of(static_cast<std::uint32_t>(at), v)) {  // unreachable: total >= 2^48
      status_ = nucleus::status::no_candidates;
      return fail();
    }
    const double y = static_cast<double>(scaled(v, max_, inv_));
    return drawn(static_cast<std::int32_t>(at), static_cast<float>(y - log_of(to_double(total))));
  }

  Block& b_;
  const T* x_;
  std::uint32_t v_;        // the row's length
  std::uint32_t n_;        // the CPU's candidate count
  std::uint64_t cut_ = 0;  // candidates: valid logits with rank key in [cut_, top_]
  std::uint64_t top_ = ~std::uint64_t{0};
  wsum total_ = 0;           // the draw's exact weight sum
  float inv_ = 1.0f;         // 1/T
  float max_ = 0.0f;         // the candidates' maximum (valid once has_max_)
  bool dense_ = true;        // no cut yet: the CPU counts the whole row
  bool sorted_ = false;      // the CPU's list is in rank order (a top-k cut)
  bool normalized_ = false;  // the CPU's list holds rank keys' values (-0 reads +0)
  bool inf_mode_ = false;    // the row held +inf: those tokens only, at logit 0
  bool has_max_ = false;
  bool max_stale_ = false;  // a cut since the maximum was taken (only its zero sign can move)
  bool greedy_ = false;
  bool typical_on_ = false;  // typical's band applies (value_of)
  nucleus::status status_ = nucleus::status::ok;
  float typical_max_ = 0.0f;  // the maximum, 1/T and mean scaled logit typical ranked by
  float typical_inv_ = 1.0f;
  double typical_mean_ = 0.0;
  double typical_dist_ = 0.0;  // its last kept candidate's distance and rank key
  std::uint64_t typical_key_ = 0;
};

// --- logprobs of the row as given ---------------------------------------------------------------

// The token's logprob and rank in log_softmax(row), and the row's top-n (sampler.hpp, raw_logprobs):
// log_softmax's own rules and bits (ops/normalizer.hpp). NaN and -inf are never candidates; a row
// holding +inf shares the mass among its +inf tokens.
template <class Block, class T>
NUCLEUS_HD void raw_logprobs(Block& b, const T* x, std::uint32_t vocab, const row_params& p, const row_io& io,
                             row_output& o) {
  using namespace nucleus::detail;
  auto cand = [&](std::uint32_t i, float& v) {
    v = to_float(x[i]);
    return v > -inf();
  };
  const std::uint32_t n = top_count_for(p, io);
  // The maximum as the CPU reads it: max_value's without a list, the first key's (a zero as +0) with
  // one. The sign of a zero maximum shows only where it is the one token of weight > 0 (lse = 0),
  // and then it is that token's.
  const std::uint64_t top = b.reduce_max(vocab, [&](std::uint32_t i) -> std::uint64_t {
    float v;
    if (!cand(i, v)) return 0;
    return (std::uint64_t{ordered(v)} << 1) | (bits_of(v) == 0 ? 1u : 0u);
  });
  float m = -inf(), lse = 0.0f, inf_lp = 0.0f;
  if (top != 0) {
    m = from_ordered(static_cast<std::uint32_t>(top >> 1));
    if (m == 0.0f && n == 0) m = top & 1 ? 0.0f : -0.0f;
    if (m == inf()) {
      const wsum infs = b.reduce_sum(
          vocab, [&](std::uint32_t i) -> std::uint64_t { return to_float(x[i]) == inf() ? 1 : 0; });
      inf_lp = static_cast<float>(-log_of(static_cast<double>(static_cast<std::uint64_t>(infs))));
    } else {
      const wsum z = b.reduce_sum(vocab, [&](std::uint32_t i) -> std::uint64_t {
        return weight(exp_scalar(scaled(to_float(x[i]), m, 1.0f)));
      });
      lse = static_cast<float>(log_of(to_double(z)));
    }
  }
  // raw_normalizer::operator()
  auto norm = [&](float v) {
    if (!(v == v) || !(m > -inf())) return -inf();
    if (m == inf()) return v == inf() ? inf_lp : -inf();
    return (v - m) - lse;
  };
  const float xt = to_float(x[o.token]);
  o.logprob = norm(xt);
  o.rank = 1 + static_cast<std::int32_t>(b.reduce_sum(
                   vocab, [&](std::uint32_t i) -> std::uint64_t { return to_float(x[i]) > xt ? 1 : 0; }));
  if (n == 0) return;
  const std::uint32_t c = top_keys(b, vocab, cand, n);
  std::uint32_t shown = 0;
  for (; shown < c; ++shown) {
    const std::uint64_t k = b.gathered(shown);
    const float lp = norm(key_value(k));
    if (m == inf() && lp == -inf()) break;  // with +inf in the row only the +inf tokens count
    if (b.leader()) {
      io.top_ids[shown] = key_id(k);
      io.top_logprobs[shown] = lp;
    }
  }
  o.top_count = shown;
}

// --- the request processors ----------------------------------------------------------------------

// A run of history tokens, prompt part then output part (history_penalties.hpp: history).
struct history_ref {
  const std::int32_t* a = nullptr;
  std::uint32_t na = 0;
  const std::int32_t* b = nullptr;
  std::uint32_t nb = 0;

  NUCLEUS_HD std::uint32_t size() const noexcept { return na + nb; }
  NUCLEUS_HD std::int32_t operator[](std::uint32_t i) const noexcept { return i < na ? a[i] : b[i - na]; }
};
// The last n tokens of prompt ++ output, n < 0: all (history_penalties.hpp: last_tokens).
NUCLEUS_HD inline history_ref last_tokens(const row_inputs& in, std::int64_t n) noexcept {
  const std::uint32_t total = in.prompt_size + in.output_size;
  const std::uint32_t keep = n < 0 || n >= total ? total : static_cast<std::uint32_t>(n);
  const std::uint32_t skip = total - keep;
  if (skip >= in.prompt_size) {
    const std::uint32_t s = skip - in.prompt_size;
    return {nullptr, 0, in.output + s, in.output_size - s};
  }
  return {in.prompt + skip, in.prompt_size - skip, in.output, in.output_size};
}

// A processor never changes -inf (banned), +inf (forced) or NaN, and never makes a finite logit
// infinite: results beyond float's range are clamped to +-FLT_MAX (processors.hpp: edit).
NUCLEUS_HD inline void edit(float& x, float to) noexcept {
  if (!(x > -nucleus::detail::inf() && x < nucleus::detail::inf())) return;
  constexpr float big = 0x1.fffffep127f;
  x = to > big ? big : to < -big ? -big : to;
}

inline constexpr std::uint32_t seen = 0x80000000u;  // a count's high bit: in the repetition history

// Writes the processed row (engine/processors.hpp, apply) into io.processed: the widened row with the
// bitmask and allowed ids, then the banned and EOS ids, the bias, the penalties. Each pass touches
// only the listed tokens, and each token's edits come in the CPU's order. invalid_input where an id
// does not fit the row (processors::fits) or the row lacks its buffers.
template <class Block, class T>
NUCLEUS_HD nucleus::status process_row(Block& b, const T* x, std::uint32_t vocab, const row_params& p,
                                       const row_io& io) {
  using nucleus::detail::inf;
  const row_inputs& in = io.inputs;
  const history_ref rep_h = last_tokens(in, p.windowed ? p.last_n : -1);
  const history_ref cnt_h = p.windowed ? rep_h : history_ref{nullptr, 0, in.output, in.output_size};
  const bool rep_on = p.repetition != 1.0f, cnt_on = p.presence != 0.0f || p.frequency != 0.0f;
  const std::uint32_t n_rep = rep_on ? rep_h.size() : 0, n_cnt = cnt_on ? cnt_h.size() : 0;
  if (io.processed == nullptr || (p.max_id >= 0 && static_cast<std::uint32_t>(p.max_id) >= vocab) ||
      ((n_rep > 0 || n_cnt > 0) && io.counts == nullptr))
    return nucleus::status::invalid_input;
  const std::uint64_t bad = b.reduce_max(n_rep + n_cnt, [&](std::uint32_t j) -> std::uint64_t {
    const std::int32_t t = j < n_rep ? rep_h[j] : cnt_h[j - n_rep];
    return t < 0 || static_cast<std::uint32_t>(t) >= vocab ? 1 : 0;
  });
  if (bad) return nucleus::status::invalid_input;

  float* out = io.processed;
  const std::uint32_t* mask = in.bitmask;
  auto allowed_by_mask = [&](std::uint32_t i) {
    return mask == nullptr || ((mask[i >> 5] >> (i & 31)) & 1u) != 0;
  };
  const std::uint32_t* lists = io.lists;
  b.for_each(vocab, [&](std::uint32_t i) {
    out[i] = p.allowed.size == 0 && allowed_by_mask(i) ? to_float(x[i]) : -inf();
  });
  b.for_each(p.allowed.size, [&](std::uint32_t j) {
    const std::uint32_t t = lists[p.allowed.at + j];
    if (allowed_by_mask(t)) out[t] = to_float(x[t]);
  });
  const std::uint32_t n_eos = in.output_size < p.min_tokens ? p.eos.size : 0;
  b.for_each(p.banned.size + n_eos, [&](std::uint32_t j) {
    out[j < p.banned.size ? lists[p.banned.at + j] : lists[p.eos.at + j - p.banned.size]] = -inf();
  });
  // Each id's run of biases by one thread, in request order.
  b.for_each(p.bias.size, [&](std::uint32_t j) {
    const std::uint32_t* pairs = lists + p.bias.at;
    const std::uint32_t t = pairs[2 * j];
    if (j > 0 && pairs[2 * j - 2] == t) return;
    for (std::uint32_t k = j; k < p.bias.size && pairs[2 * k] == t; ++k)
      edit(out[t], out[t] + nucleus::detail::float_from_bits(pairs[2 * k + 1]));
  });
  if (n_rep == 0 && n_cnt == 0) return nucleus::status::ok;
  // The penalties: each history token's count (and whether the repetition history holds it), then
  // one thread per distinct token (the one that takes its count back to zero) edits it.
  std::uint32_t* counts = io.counts;
  b.for_each(n_rep, [&](std::uint32_t j) { b.fetch_or(counts + rep_h[j], seen); });
  b.for_each(n_cnt, [&](std::uint32_t j) { b.fetch_add(counts + cnt_h[j], 1u); });
  b.for_each(n_rep + n_cnt, [&](std::uint32_t j) {
    const std::int32_t t = j < n_rep ? rep_h[j] : cnt_h[j - n_rep];
    const std::uint32_t c = b.exchange(counts + t, 0u);
    if (c == 0) return;  // another position's thread has it
    float& v = out[t];
    if (c & seen) edit(v, v > 0.0f ? v / p.repetition : v * p.repetition);
    if (const std::uint32_t k = c & ~seen; k != 0)
      edit(v, v - (nucleus::detail::mul_rounded(static_cast<float>(k), p.frequency) + p.presence));
  });
  return nucleus::status::ok;
}

}  // namespace detail

// Samples one row with any block backend: the function the kernels and the CPU test share. Rows with
// processors (a list, a penalty or a bitmask) are processed into io.processed first; the stages and
// the draw read that copy, the raw logprobs the row as given.
template <class Block, class T>
NUCLEUS_HD row_output sample_row(Block& b, const T* row, std::uint32_t vocab, const row_params& p,
                                 draw_key key, const row_io& io = {}) {
  row_output o;
  if (vocab == 0) {
    o.status = nucleus::status::empty_row;
    return o;
  }
  if (p.mirostat != 0 && io.mirostat_mu == nullptr) {  // as nc::sampler: mu is the request's
    o.status = nucleus::status::invalid_input;
    return o;
  }
  if (p.lists || io.inputs.bitmask != nullptr) {
    o.status = detail::process_row(b, row, vocab, p, io);
    if (o.status != nucleus::status::ok) return o;
    detail::row_sampler<Block, float> s(b, detail::row_ref<float>{io.processed, vocab});
    o = s.run(p, key, io);
  } else {
    detail::row_sampler<Block, T> s(b, detail::row_ref<T>{row, vocab});
    o = s.run(p, key, io);
  }
  if (o.status == nucleus::status::ok && p.logprobs >= 0 && p.raw_logprobs)
    detail::raw_logprobs(b, row, vocab, p, io, o);
  return o;
}

}  // namespace nucleus::cuda
