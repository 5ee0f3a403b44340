// Exact sampling of a row split by vocabulary into contiguous shards (tensor-parallel LM heads): each
// shard sees only its slice [v0, v0 + n) of the row, the shards exchange small summaries in rounds,
// and every shard ends with the token, logprob, rank, top-n and status the engine sampler gives on
// the whole row, bit for bit, whatever the number of shards and wherever they are cut.
//
// Why it can be exact: every sum nucleus draws from is an integer sum of exact weights
// (simd/scalar.hpp), the maximum is order-free, and the draw walks the candidates in id order or
// rank order, both of which shards reproduce. Algorithm, rounds and bytes: docs/distributed.md.
//
// No transport here: a round is "each shard's outgoing() message to every shard, in shard order"
// (an all-gather). nucleus/sharded/split.hpp runs shards on threads; nucleus/mpi/sharded.hpp on MPI.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "nucleus/engine/sampler.hpp"
#include "nucleus/sharded/message.hpp"
#include "nucleus/sharded/ops.hpp"

namespace nucleus {

class shard_sampler {
 public:
  // How a row is split up, chosen from the sampler's knobs (docs/distributed.md has each one's rounds):
  //   greedy  T = 0: each shard's best key, one round.
  //   top_k   top-(k+1) keys per shard; the chain then runs on the merged keys (plus a round of ties
  //           when top-k keeps ties).
  //   top_p   top-`budget` keys and the exact mass; past the budget, a mass histogram, the edge bin's
  //           members, and a distributed draw.
  //   dense   temperature / min-p only: the mass per shard, then the shard that holds the draw's
  //           point picks.
  //   gather  anything else (typical, top-n-sigma, xtc, epsilon, eta, dynamic temperature, mirostat):
  //           the shards' slices are gathered and the sampler runs on the whole row.
  enum class path : std::uint8_t { gather, greedy, top_k, top_p, dense };

  // How many leaders each shard sends for top-p before the exact histogram rounds: enough for a
  // confident row's nucleus in two rounds, few enough that the selection stays cheap.
  static constexpr std::size_t default_budget = 64;
  explicit shard_sampler(std::size_t budget = default_budget) : budget_(std::max<std::size_t>(budget, 1)) {}

  // The path the last row took.
  path route() const noexcept { return plan_.route; }

  // The path rows of sampler s take.
  static path route_of(const sampler& s) noexcept {
    const sampling_params& p = s.params();
    // Any knob the table (engine/knobs.hpp) marks gather, when it acts, gathers the row.
    for (const knob& k : knobs)
      if (k.shard == shard_rule::gather && k.on && k.on(p)) return path::gather;
    const float t = detail::chain_temperature(s.order(), p.temperature);
    if (t == 0.0f || !(1.0f / t <= std::numeric_limits<float>::max()))
      return path::greedy;  // greedy at any point of the chain: the row's argmax
    if (p.top_k > 0) return path::top_k;
    if (p.top_p < 1.0f) return path::top_p;
    return path::dense;
  }

  // Starts a row sampled with s: this shard, number `index` in vocabulary order, holds ids
  // [v0, v0 + slice.size()) of a row of `vocab` logits. s, the slice and rq must stay valid until
  // done(). ws is this shard's own.
  template <logit_type T>
  void begin(const sampler& s, std::span<const T> slice, std::size_t v0, std::size_t vocab,
             const row_request& rq, workspace& ws, std::size_t index) {
    plan(s);
    row_ = row{.raw = slice.data(),
               .raw_type = dtype_of<T>,
               .v0 = v0,
               .n = slice.size(),
               .vocab = vocab,
               .index = index,
               .rq = &rq,
               .ws = &ws};
    switch (plan_.route) {  // every route's state starts from its defaults
      case path::gather:
        route_.emplace<gather_route>();
        break;
      case path::greedy:
        route_.emplace<greedy_route>();
        break;
      case path::top_k:
        route_.emplace<top_k_route>();
        break;
      case path::top_p:
        route_.emplace<top_p_route>();
        break;
      case path::dense:
        route_.emplace<dense_route>();
        break;
    }
    cur_ = 0;
    out_[0].clear(0);
    ws.reserve(row_.n);
    const detail::processors& procs = s.processors();
    if (vocab == 0) return finish({.status = status::empty_row});
    if (!procs.fits(vocab, rq)) return finish({.status = status::invalid_input});
    if (plan_.route == path::gather) {
      out().row.resize(row_.n * sizeof(T));
      if (row_.n) std::memcpy(out().row.data(), slice.data(), row_.n * sizeof(T));
      row_.at = phase::gathered;
      return sent();
    }
    if (procs.active(rq)) row_.proc = procs.apply_slice(slice, v0, vocab, ws, rq);
    const std::size_t n = row_.n;
    std::size_t want = 0;
    if (plan_.route == path::greedy) {  // one pass: the argmax is the shard's best key and its maximum
      const detail::argmax_result a = visit_proc([&](const auto* x) { return detail::argmax(x, n); });
      out().max = a.value;
      if (a.index >= 0)
        out().keys.push_back(detail::rank_key(a.value, global(static_cast<std::int32_t>(a.index))));
    } else {
      out().max = visit_proc([&](const auto* x) { return detail::max_value(x, n); });
    }
    if (plan_.route == path::top_k) want = plan_.k + 1;
    if (plan_.route == path::top_p) want = std::max(budget_, plan_.top_n);
    if (plan_.route == path::dense && !plan_.raw_logprobs) want = plan_.top_n;
    if (plan_.route != path::greedy) select_keys(want, /*raw=*/false, out().keys);
    // (a shard asked for at least its whole slice sent every candidate it has)
    out().truncated = want > 0 && want < n && out().keys.size() == want;
    if (plan_.raw_logprobs && plan_.logprobs >= 0) {
      out().raw_max = visit_raw([&](const auto* x) { return detail::max_value(x, n); });
      select_keys(plan_.top_n, /*raw=*/true, out().raw_keys);
    }
    row_.at = phase::stats;
    sent();
  }

  bool done() const noexcept { return row_.done; }
  // This shard's message for the current round (valid until step()).
  const shard_message& outgoing() const noexcept { return out_[cur_]; }

  // One round: all[i] is shard i's outgoing(), shards in vocabulary order, this one included.
  template <class Messages>
  void step(const Messages& all) {
    if (row_.done) return;
    for (const shard_message& m : all)
      if (m.round != outgoing().round)
        throw std::invalid_argument("nucleus::shard_sampler: a message of round " + std::to_string(m.round) +
                                    " arrived in round " + std::to_string(outgoing().round));
    switch (row_.at) {
      case phase::gathered:
        return finish_gathered(all);
      case phase::stats:
        return after_stats(all);
      case phase::ties:
        return after_ties(all);
      case phase::mass:
        return after_mass(all);
      case phase::hist:
        return after_hist(all);
      case phase::bin:
        return after_bin(all);
      case phase::draw_mass:
        return after_draw_mass(all);
      case phase::token:
        return after_token(all);
      case phase::rank:
        return after_rank(all);
      case phase::raw_norm:
        return after_raw_norm(all);
    }
  }

  // The row's result (the same on every shard); top receives its top-n entries.
  row_result result(std::span<token_logprob> top = {}) const {
    row_result r = row_.result;
    const std::size_t n = std::min<std::size_t>(top.size(), r.top_count);
    std::copy_n(top_.begin(), n, top.begin());
    r.top_count = static_cast<std::uint32_t>(n);
    return r;
  }
  // Rounds this row took, and the bytes this shard sent in them (shard_message::wire_size).
  std::size_t rounds() const noexcept { return row_.rounds; }
  std::size_t bytes_sent() const noexcept { return row_.bytes; }

 private:
  enum class phase : std::uint8_t {
    gathered,   // gather: every slice sent; the whole row is sampled
    stats,      // every route: the maxima and the shards' leaders
    ties,       // top_k keeping ties: every tie of the k-th
    mass,       // top_p: the exact mass
    hist,       // top_p's spill: the mass histogram
    bin,        // top_p's spill: the edge bin's members
    draw_mass,  // top_p, dense: each shard's share of the draw's mass
    token,      // the shard holding the draw's point names the token
    rank,       // the token's rank
    raw_norm    // raw logprobs: the raw row's normalizer
  };
  using any_chain = sampler::any_chain;

  // --- what a sampler's rows need, from its knobs (plan()) ----------------------------------------
  struct row_plan {
    const sampler* owner = nullptr;
    path route = path::gather;
    int logprobs = -1;         // params().logprobs
    std::size_t top_n = 0;     // top-n entries a row writes
    bool raw_logprobs = true;  // logprobs of the raw row, not the processed one
    std::size_t k = 0;         // top-k
    bool keep_ties = false;    // top-k keeps every tie of the k-th (vLLM, HF)
    // vLLM's min-p runs before top-k: top-k then sees the min-p survivors, in id order.
    bool keys_in_id_order = false;
    float top_p = 1.0f, min_p = 0.0f, log_min_p = 0.0f;
    bool min_p_first = false;  // min-p before top-p (vLLM)
    float inv_draw = 1.0f;     // the draw's 1 / T
    float inv_cut = 1.0f;      // 1 / T as top-p and min-p see it (1 in llama.cpp: temperature last)
    std::uint64_t seed = 0;
  };

  // --- one row: what every route keeps, value-initialised by begin() ------------------------------
  struct row {
    const void* raw = nullptr;  // this shard's slice as the caller stored it
    logit_dtype raw_type = logit_dtype::f32;
    const float* proc = nullptr;  // the processed slice, when a processor acts on this row
    std::size_t v0 = 0, n = 0, vocab = 0, index = 0;
    const row_request* rq = nullptr;
    workspace* ws = nullptr;
    phase at = phase::stats;
    bool done = false;
    row_result result{};
    std::size_t bytes = 0, rounds = 0;
    float max = 0.0f;                // the row's largest candidate (0 for a row holding +inf)
    float raw_max = -detail::inf();  // the raw row's largest logit
    bool inf_row = false;            // the row holds +inf: only those tokens, at logit 0, are candidates
    std::size_t cands = 0;           // this shard's candidates
    std::size_t pre_n = 0;           // those still in play this round
    bool pre_compact = false;        // ... listed in ws.vals / ws.ids
    bool pre_done = false;           // the thresholds before top-p have narrowed them
    std::size_t exact = 0;           // leading merged keys that are the row's true leaders
    detail::wsum total = 0;          // the draw's mass
    float token_logit = 0.0f;        // the drawn token's logit as the chain saw it
    float token_raw = 0.0f;          // and in the raw row
    bool has_token_raw = false;
  };

  // --- each route's own state, value-initialised by begin() ----------------------------------------
  struct gather_route {};  // (the gathered row is the buffer row_bytes_)
  struct greedy_route {};
  struct top_k_route {};  // (the merged leaders and ties are the buffers merged_, members_)
  struct top_p_route {
    detail::wsum bound = 0;   // keep while the mass before a token is below it
    detail::wsum before = 0;  // the mass of the bins before the edge bin
    std::uint64_t cut_key = 0;
    bool has_cut = false;  // the cut fell past the leaders: cut_key is the last kept token
  };
  struct dense_route {};

  // The sampler's chain with top-p switched off: what runs on survivors top-p has already cut.
  static any_chain without_top_p(const any_chain& c) {
    return std::visit(
        [](const auto& ch) -> any_chain {
          auto stages = ch.stages();
          std::get<top_p_stage>(stages).top_p = 1.0f;
          return std::remove_cvref_t<decltype(ch)>(stages);
        },
        c);
  }

  // The path and thresholds of sampler s (cheap: a few comparisons and a copy of its stage values).
  void plan(const sampler& s) {
    const sampling_params& p = s.params();
    const engine_order o = s.order();
    const float t = detail::chain_temperature(o, p.temperature);
    const float inv = t == 0.0f ? 0.0f : 1.0f / t;
    plan_ = row_plan{.owner = &s,
                     .route = route_of(s),
                     .logprobs = p.logprobs,
                     .top_n = s.top_n(),
                     .raw_logprobs = p.logprobs_mode == logprob_mode::raw,
                     .k = p.top_k > 0 ? static_cast<std::size_t>(p.top_k) : 0,
                     .keep_ties = o == engine_order::vllm || o == engine_order::hf,
                     .keys_in_id_order = o == engine_order::vllm && p.min_p > 0.0f,
                     .top_p = p.top_p,
                     .min_p = p.min_p,
                     .log_min_p = std::log(p.min_p),
                     .min_p_first = o == engine_order::vllm,
                     .inv_draw = inv,
                     .inv_cut = o == engine_order::llama_cpp ? 1.0f : inv,
                     .seed = p.seed};
    rest_ = without_top_p(s.chain());
  }

  template <class F>
  decltype(auto) visit_raw(F&& f) const {
    return detail::visit_logits(row_.raw, row_.raw_type, std::forward<F>(f));
  }
  // The processed slice (the raw one when no processor acts on this row).
  template <class F>
  decltype(auto) visit_proc(F&& f) const {
    if (row_.proc) return f(row_.proc);
    return visit_raw(std::forward<F>(f));
  }
  // This shard's candidates as the chain sees them after the row's maximum is known: the slice
  // itself, or (for a row holding +inf) its +inf tokens at logit 0 in ws.vals / ws.ids.
  template <class F>
  decltype(auto) visit_cands(F&& f) const {
    if (row_.inf_row) return f(static_cast<const float*>(row_.ws->vals.data()));
    return visit_proc(std::forward<F>(f));
  }
  // The candidates still in play for the current round (after the thresholds narrowed them).
  template <class F>
  decltype(auto) visit_pre(F&& f) const {
    if (row_.pre_compact) return f(static_cast<const float*>(row_.ws->vals.data()));
    return visit_cands(std::forward<F>(f));
  }
  const std::int32_t* pre_ids() const noexcept { return row_.pre_compact ? row_.ws->ids.data() : nullptr; }

  top_p_route* cut_state() noexcept { return std::get_if<top_p_route>(&route_); }
  bool has_cut() const noexcept {
    const top_p_route* r = std::get_if<top_p_route>(&route_);
    return r && r->has_cut;
  }

  // This round's message is built in the other buffer, so that shards still reading the last one
  // (on other threads) see it unchanged until every shard has stepped.
  shard_message& out() noexcept { return out_[cur_]; }
  void next_message() {
    cur_ ^= 1;
    out_[cur_].clear(static_cast<std::uint32_t>(row_.rounds));
  }

  void sent() {
    row_.bytes += out().wire_size();
    ++row_.rounds;
  }
  void finish(row_result r) {
    row_.result = r;
    row_.done = true;
  }
  std::int32_t global(std::int32_t local) const noexcept {
    return static_cast<std::int32_t>(row_.v0) + local;
  }

  // This shard's `want` best keys (processed or raw), with global ids.
  void select_keys(std::size_t want, bool raw, std::vector<std::uint64_t>& into) {
    into.clear();
    const std::size_t n = row_.n;
    want = std::min(want, n);  // never more than the slice: a huge top_k costs no more than k = n
    if (want == 0) return;
    std::uint64_t* keys = row_.ws->keys.ensure(detail::select_capacity(want));
    auto sel = [&](const auto* x) { return detail::select_top_k(x, nullptr, n, want, keys); };
    const std::size_t c = raw ? visit_raw(sel) : visit_proc(sel);
    for (std::size_t i = 0; i < c; ++i)
      into.push_back(detail::rank_key(detail::key_value(keys[i]), global(detail::key_id(keys[i]))));
  }

  // Every shard's keys of one field, merged best first; returns how many of them are the row's
  // true leaders (past it a shard that sent only its best may hold better ones).
  template <class Messages>
  std::size_t merge_keys(const Messages& all, std::vector<std::uint64_t> shard_message::*field,
                         std::vector<std::uint64_t>& into) {
    // Each shard's keys arrive best first: merge the runs (linear per run, no sort of the whole).
    into.clear();
    std::uint64_t floor = 0;
    for (const shard_message& m : all) {
      const auto& k = m.*field;
      if (m.truncated && field == &shard_message::keys && !k.empty()) floor = std::max(floor, k.back());
      if (k.empty()) continue;
      merge_tmp_.resize(into.size() + k.size());
      std::merge(into.begin(), into.end(), k.begin(), k.end(), merge_tmp_.begin(), std::greater<>{});
      into.assign(merge_tmp_.begin(), merge_tmp_.end());  // (not a swap: each buffer keeps its role and size)
    }
    // Every key at or above the highest last key of a shard that stopped short was sent.
    return static_cast<std::size_t>(std::upper_bound(into.begin(), into.end(), floor, std::greater<>{}) -
                                    into.begin());
  }

  // --- round 1: the row's maximum and the shards' leaders ------------------------------------
  template <class Messages>
  void after_stats(const Messages& all) {
    float mx = -detail::inf(), raw_mx = -detail::inf();
    for (const shard_message& m : all) {
      mx = std::max(mx, m.max);
      raw_mx = std::max(raw_mx, m.raw_max);
    }
    row_.raw_max = raw_mx;
    if (!(mx > -detail::inf())) return finish({.status = status::no_candidates});
    row_.inf_row = mx == detail::inf();
    row_.max = row_.inf_row ? 0.0f : mx;
    if (row_.inf_row) {  // the chain's rule: only the +inf tokens stay, at logit 0 (row_state::max_logit)
      workspace& ws = *row_.ws;
      const std::size_t c = visit_proc([&](const auto* x) {
        return detail::compact_ge(x, nullptr, row_.n, 0.0f, 1.0f, detail::inf(), ws.vals.data(),
                                  ws.ids.data());
      });
      std::fill_n(ws.vals.data(), c, 0.0f);
      row_.cands = c;
    } else {
      row_.cands = row_.n;
    }
    row_.exact = merge_keys(all, &shard_message::keys, merged_);
    merge_keys(all, &shard_message::raw_keys, merged_raw_);
    switch (plan_.route) {
      case path::greedy:
        return finish_greedy();
      case path::top_k:
        return top_k_leaders();
      case path::top_p:
        next_message();
        narrow_pre();
        out().mass = cand_mass(plan_.inv_cut, nullptr);
        row_.at = phase::mass;
        return sent();
      case path::dense:
        return start_draw();
      case path::gather:
        return;
    }
  }

  // --- top-k ---------------------------------------------------------------------------------
  // The merged k + 1 leaders settle the row unless top-k keeps ties and the k-th has one past them.
  void top_k_leaders() {
    const std::size_t k = plan_.k;
    const bool more_ties = plan_.keep_ties && merged_.size() > k &&
                           detail::key_value(merged_[k]) == detail::key_value(merged_[k - 1]);
    merged_.resize(std::min(merged_.size(), more_ties ? k : k + 1));
    if (!more_ties) return finish_on_keys(merged_, !plan_.keys_in_id_order && k < row_.vocab, chain());
    const float tie_value = detail::key_value(merged_[k - 1]);
    next_message();
    const std::size_t n = row_.n;
    std::uint64_t* keys = row_.ws->keys.ensure(n + 1);
    const std::size_t c = visit_proc([&](const auto* x) {
      return detail::collect_ties(x, nullptr, n, tie_value, ~std::uint64_t{0}, keys, 0, n);
    });
    for (std::size_t i = 0; i < c; ++i)
      out().keys.push_back(detail::rank_key(tie_value, global(detail::key_id(keys[i]))));
    std::sort(out().keys.begin(), out().keys.end(), std::greater<>{});  // sent best first
    row_.at = phase::ties;
    sent();
  }

  template <class Messages>
  void after_ties(const Messages& all) {
    // The first k, then every tie of the k-th (some of which are among the first k).
    merge_keys(all, &shard_message::keys, members_);
    merged_.insert(merged_.end(), members_.begin(), members_.end());
    std::sort(merged_.begin(), merged_.end(), std::greater<>{});
    merged_.erase(std::unique(merged_.begin(), merged_.end()), merged_.end());
    finish_on_keys(merged_, !plan_.keys_in_id_order && plan_.k < row_.vocab, chain());
  }

  // --- top-p ---------------------------------------------------------------------------------
  template <class Messages>
  void after_mass(const Messages& all) {
    top_p_route& tp = *cut_state();
    detail::wsum total = 0;
    for (const shard_message& m : all) total += m.mass;
    tp.bound = detail::mass_bound(plan_.top_p, total);
    // Walk the leaders that are exact: their masses before each one are the row's.
    detail::wsum before = 0;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < row_.exact; ++i) {
      float v = detail::key_value(merged_[i]);
      if (row_.inf_row) {
        if (v != detail::inf()) break;  // the +inf tokens come first; nothing else is a candidate
        v = 0.0f;
      }
      if (!passes_pre(v)) break;  // thresholds are monotone: all later ones fail too
      if (!(before < tp.bound)) break;
      before += detail::weight(detail::exp_scalar(detail::scaled(v, row_.max, plan_.inv_cut)));
      kept = i + 1;
    }
    if (!(before < tp.bound)) {  // the nucleus lies within the leaders
      merged_.resize(kept);
      return finish_on_keys(merged_, false, *rest_);
    }
    // Spill: top-p's own histogram over the whole row, then its edge bin. First, as top-p does, the
    // tokens that cannot be reached go: all those below (1 - p) * Z / (2 V) together hold less than
    // the share the cut leaves out (V >= the candidates, so this keeps a superset of top-p's).
    const double floor_w = (1.0 - static_cast<double>(plan_.top_p)) * detail::to_double(total) /
                           (2.0 * static_cast<double>(row_.vocab));
    narrow(row_.max, plan_.inv_cut, static_cast<float>(std::log(floor_w)));
    next_message();
    // The histogram top-p builds (detail::mass_histogram), of this shard's survivors.
    std::vector<detail::wsum>& h = out().hist;
    h.assign(detail::hist_bins, 0);
    visit_pre([&](const auto* x) {
      detail::mass_histogram(x, row_.pre_n, row_.max, plan_.inv_cut, -detail::top_p_bins_per_unit,
                             static_cast<std::uint32_t>(detail::hist_bins - 1), h.data());
    });
    while (!h.empty() && h.back() == 0) h.pop_back();  // empty bins past the last used one are not sent
    row_.at = phase::hist;
    sent();
  }

  template <class Messages>
  void after_hist(const Messages& all) {
    top_p_route& tp = *cut_state();
    detail::wsum* mass = row_.ws->hist_mass.data();  // the row's histogram: the shards' bins added
    std::fill(mass, mass + detail::hist_bins, detail::wsum{0});
    for (const shard_message& m : all)
      for (std::size_t b = 0; b < m.hist.size() && b < detail::hist_bins; ++b) mass[b] += m.hist[b];
    const detail::bin_edge e = detail::find_edge_bin(mass, detail::hist_bins, tp.bound);
    if (e.edge == detail::hist_bins)
      return start_draw();  // unreachable (the bins hold the total); as top-p: no cut
    tp.before = e.before;
    next_message();
    const float hi = e.edge + 1 < detail::hist_bins ? static_cast<float>(e.edge + 1) : detail::inf();
    std::uint64_t* keys = row_.ws->keys.ensure(row_.pre_n + 1);
    const std::size_t c = visit_pre([&](const auto* x) {
      return detail::collect_bin(x, pre_ids(), row_.pre_n, row_.max, plan_.inv_cut,
                                 -detail::top_p_bins_per_unit, static_cast<float>(e.edge), hi, keys);
    });
    for (std::size_t i = 0; i < c; ++i)
      out().keys.push_back(detail::rank_key(detail::key_value(keys[i]), global(detail::key_id(keys[i]))));
    std::sort(out().keys.begin(), out().keys.end(), std::greater<>{});  // sent best first
    row_.at = phase::bin;
    sent();
  }

  template <class Messages>
  void after_bin(const Messages& all) {
    top_p_route& tp = *cut_state();
    merge_keys(all, &shard_message::keys, members_);
    const std::size_t cut =
        detail::walk_cut(members_.data(), members_.size(), tp.before, tp.bound, row_.max, plan_.inv_cut);
    tp.cut_key = members_.empty() ? ~std::uint64_t{0} : members_[cut];
    tp.has_cut = true;
    start_draw();
  }

  // --- the draw over survivors spread across shards ---------------------------------------------
  void start_draw() {
    next_message();
    narrow_pre();
    narrow_post();
    out().mass = cand_mass(plan_.inv_draw, row_.ws->blocks.ensure(row_.pre_n / detail::block_elems + 1));
    row_.at = phase::draw_mass;
    sent();
  }

  template <class Messages>
  void after_draw_mass(const Messages& all) {
    row_.total = 0;
    for (const shard_message& m : all) row_.total += m.mass;
    if (row_.total == 0)
      return finish({.status = status::no_candidates});  // unreachable: the max weighs 2^48
    const detail::wsum point = detail::draw_point(key_of(*row_.rq, plan_.seed), row_.total);
    // The owner: the first shard whose mass takes the running total past the point.
    detail::wsum before = 0;
    std::size_t owner = 0, i = 0;
    bool found = false;
    for (const shard_message& m : all) {
      if (!found && before + m.mass > point) {
        owner = i;
        found = true;
      }
      if (!found) before += m.mass;
      ++i;
    }
    next_message();
    if (owner == row_.index) {
      workspace& ws = *row_.ws;
      const std::int64_t at = visit_pre([&](const auto* x) {
        return detail::pick(x, row_.pre_n, row_.max, plan_.inv_draw, ws.blocks.data(), point - before,
                            ws.block_scratch.data());
      });
      if (at >= 0) {
        const auto j = static_cast<std::size_t>(at);
        const std::int32_t local = pre_ids() ? pre_ids()[j] : static_cast<std::int32_t>(j);
        out().token = global(local);
        out().max = visit_pre([&](const auto* x) { return to_float(x[j]); });
        out().raw_max = visit_raw([&](const auto* x) { return to_float(x[local]); });
      }
    }
    row_.at = phase::token;
    sent();
  }

  template <class Messages>
  void after_token(const Messages& all) {
    std::int32_t tok = -1;
    for (const shard_message& m : all)
      if (m.token >= 0) {
        tok = m.token;
        row_.token_logit = m.max;
        row_.token_raw = m.raw_max;
        row_.has_token_raw = true;
      }
    if (tok < 0) return finish({.status = status::no_candidates});  // unreachable
    const float shift = row_.max, inv = plan_.inv_draw;
    const double log_z = std::log(detail::to_double(row_.total));
    row_result r{
        tok, static_cast<float>(static_cast<double>(detail::scaled(row_.token_logit, shift, inv)) - log_z), 0,
        0, status::ok};
    row_.result = r;
    if (plan_.logprobs < 0) return finish(r);
    if (plan_.raw_logprobs) return start_raw();
    // Processed: the top-n are the leaders among the survivors; the rank needs one more round.
    const top_p_route* tp = has_cut() ? cut_state() : nullptr;
    std::size_t c = 0;
    for (std::size_t i = 0; i < merged_.size() && c < plan_.top_n; ++i) {
      float v = detail::key_value(merged_[i]);
      if (row_.inf_row) {
        if (v != detail::inf()) break;
        v = 0.0f;
      }
      // (the cut's key holds candidate values: 0 for a +inf row's tokens)
      if (!passes_pre(v) || !passes_post(v)) break;
      if (tp && detail::rank_key(v, detail::key_id(merged_[i])) < tp->cut_key) break;
      top_[c++] = {detail::key_id(merged_[i]),
                   static_cast<float>(static_cast<double>(detail::scaled(v, shift, inv)) - log_z)};
    }
    row_.result.top_count = static_cast<std::uint32_t>(c);
    next_message();
    out().count =
        visit_pre([&](const auto* x) { return detail::count_greater(x, row_.pre_n, row_.token_logit); });
    row_.at = phase::rank;
    sent();
  }

  // The token's rank: 1 + the tokens ranked above it, summed over the shards.
  template <class Messages>
  void after_rank(const Messages& all) {
    std::uint64_t above = 0;
    for (const shard_message& m : all) above += m.count;
    row_.result.rank = static_cast<std::int32_t>(above + 1);
    finish(row_.result);
  }

  // --- raw logprobs: the raw row's normalizer and the token's raw rank ----------------------------
  void start_raw() {
    next_message();
    const std::size_t n = row_.n;
    out().raw_max = -detail::inf();
    if (row_.raw_max == detail::inf()) {
      out().raw_count = visit_raw(
          [&](const auto* x) { return detail::count_greater(x, n, std::numeric_limits<float>::max()); });
    } else if (row_.raw_max > -detail::inf()) {
      out().raw_mass =
          visit_raw([&](const auto* x) { return detail::exp_sum(x, n, row_.raw_max, 1.0f, nullptr); });
    }
    const auto t = static_cast<std::size_t>(row_.result.token);
    if (!row_.has_token_raw && t >= row_.v0 && t - row_.v0 < n) {
      out().token = row_.result.token;
      out().raw_max = visit_raw([&](const auto* x) { return to_float(x[t - row_.v0]); });
    }
    row_.at = phase::raw_norm;
    sent();
  }

  template <class Messages>
  void after_raw_norm(const Messages& all) {
    detail::wsum mass = 0;
    std::uint64_t infs = 0;
    for (const shard_message& m : all) {
      mass += m.raw_mass;
      infs += m.raw_count;
      if (!row_.has_token_raw && m.token >= 0) row_.token_raw = m.raw_max;
    }
    const detail::raw_normalizer norm = detail::normalizer_of_parts(row_.raw_max, infs, mass);
    row_.result.logprob = norm(row_.token_raw);
    const std::size_t shown = detail::raw_top_entries(
        norm, std::span<const std::uint64_t>(merged_raw_).first(std::min(plan_.top_n, merged_raw_.size())),
        std::span<token_logprob>(top_));
    row_.result.top_count = static_cast<std::uint32_t>(shown);
    next_message();  // the rank round, as the processed one (after_rank) but in the raw row
    out().count = visit_raw([&](const auto* x) { return detail::count_greater(x, row_.n, row_.token_raw); });
    row_.at = phase::rank;
    sent();
  }

  // --- finishing where every shard holds the survivors ------------------------------------------
  void finish_greedy() {
    row_result r{detail::key_id(merged_[0]), 0.0f, 0, 0, status::ok};
    row_.result = r;
    if (plan_.logprobs < 0) return finish(r);
    if (plan_.raw_logprobs) return start_raw();
    row_.result.rank = 1;
    if (plan_.top_n > 0) {
      top_[0] = {r.token, 0.0f};
      row_.result.top_count = 1;
    }
    finish(row_.result);
  }

  // Runs chain c on the candidates in `keys` (the row's survivors so far, logits as in the row),
  // in rank order with the sorted flag or in id order without: the state the whole row would be in.
  void finish_on_keys(std::span<const std::uint64_t> keys, bool rank_order, const any_chain& c) {
    const std::size_t n = keys.size();
    list_.assign(keys.begin(), keys.end());
    if (!rank_order)
      std::sort(list_.begin(), list_.end(),
                [](std::uint64_t a, std::uint64_t b) { return detail::key_id(a) < detail::key_id(b); });
    workspace& ws = *row_.ws;
    ws.reserve(n);
    float* v = ws.vals.data();
    std::int32_t* id = ws.ids.data();
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = detail::key_value(list_[i]);
      id[i] = detail::key_id(list_[i]);
    }
    row_state s(std::span<const float>(v, n), ws);
    s.assign(n, rank_order);
    const sample_result d =
        std::visit([&](const auto& ch) { return ch.finish(s, key_of(*row_.rq, plan_.seed)); }, c);
    row_result r{d.token, d.logprob, 0, 0, d.status};
    row_.result = r;
    if (d.status != status::ok || plan_.logprobs < 0) return finish(r);
    if (plan_.raw_logprobs) return start_raw();
    sampler::processed_logprobs(s, row_.result, ws, std::span<token_logprob>(top_.data(), plan_.top_n));
    finish(row_.result);
  }

  template <class Messages>
  void finish_gathered(const Messages& all) {
    std::size_t bytes = 0;
    for (const shard_message& m : all) bytes += m.row.size();
    row_bytes_.resize(bytes);
    std::size_t at = 0;
    for (const shard_message& m : all) {
      if (!m.row.empty()) std::memcpy(row_bytes_.data() + at, m.row.data(), m.row.size());
      at += m.row.size();
    }
    row_.ws->reserve(row_.vocab);
    finish(detail::visit_logits(row_bytes_.data(), row_.raw_type, [&](const auto* x) {
      using T = std::remove_cvref_t<decltype(*x)>;
      return plan_.owner->sample(std::span<const T>(x, bytes / sizeof(T)), *row_.ws, *row_.rq,
                                 std::span<token_logprob>(top_.data(), plan_.top_n));
    }));
  }

  // --- this shard's candidates under the thresholds ------------------------------------------------
  const any_chain& chain() const noexcept { return plan_.owner->chain(); }

  bool passes_pre(float v) const noexcept {
    return !(plan_.min_p_first && plan_.min_p > 0.0f) ||
           detail::scaled(v, row_.max, plan_.inv_cut) >= plan_.log_min_p;
  }
  bool passes_post(float v) const noexcept {
    return !(!plan_.min_p_first && plan_.min_p > 0.0f) ||
           detail::scaled(v, row_.max, plan_.inv_cut) >= plan_.log_min_p;
  }

  // The candidates top-p sums over: after the min-p that comes before it (vLLM).
  void narrow_pre() {
    if (row_.pre_done) return;
    row_.pre_done = true;
    row_.pre_n = row_.cands;
    row_.pre_compact = row_.inf_row;
    if (plan_.min_p_first && plan_.min_p > 0.0f) narrow(row_.max, plan_.inv_cut, plan_.log_min_p);
  }
  // Then the survivors of the draw: top-p's cut and the min-p after it.
  void narrow_post() {
    if (const top_p_route* tp = cut_state(); tp && tp->has_cut) {
      const float cut_v = detail::key_value(tp->cut_key);
      narrow(0.0f, 1.0f, cut_v);
      const std::int32_t cut_id = detail::key_id(tp->cut_key);
      std::size_t o = 0;
      float* v = row_.ws->vals.data();
      std::int32_t* id = row_.ws->ids.data();
      for (std::size_t i = 0; i < row_.pre_n; ++i) {
        if (v[i] == cut_v && global(id[i]) > cut_id) continue;
        v[o] = v[i];
        id[o] = id[i];
        ++o;
      }
      row_.pre_n = o;
    }
    if (!plan_.min_p_first && plan_.min_p > 0.0f) narrow(row_.max, plan_.inv_cut, plan_.log_min_p);
  }
  // Keeps the candidates with (x - shift) * scale >= threshold in ws.vals / ws.ids (local ids).
  void narrow(float shift, float scale, float threshold) {
    workspace& ws = *row_.ws;
    row_.pre_n = visit_pre([&](const auto* x) {
      return detail::compact_ge(x, pre_ids(), row_.pre_n, shift, scale, threshold, ws.vals.data(),
                                ws.ids.data());
    });
    row_.pre_compact = true;
  }

  detail::wsum cand_mass(float inv, std::uint64_t* blocks) const {
    return visit_pre([&](const auto* x) { return detail::exp_sum(x, row_.pre_n, row_.max, inv, blocks); });
  }

  std::size_t budget_ = default_budget;
  row_plan plan_;
  std::optional<any_chain> rest_;  // the chain without top-p (plan())
  row row_;
  std::variant<gather_route, greedy_route, top_k_route, top_p_route, dense_route> route_;

  // --- buffers kept from row to row (no allocation once warm) ----------------------------------
  shard_message out_[2];
  unsigned cur_ = 0;
  std::array<token_logprob, max_logprobs> top_{};
  std::vector<std::uint64_t> merged_, merged_raw_, members_, list_, merge_tmp_;
  std::vector<std::byte> row_bytes_;
};

}  // namespace nucleus
