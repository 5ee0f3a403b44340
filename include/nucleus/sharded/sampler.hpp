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
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "nucleus/engine/sampler.hpp"
#include "nucleus/sharded/message.hpp"
#include "nucleus/sharded/ops.hpp"

namespace nucleus {

namespace detail {
// The parts of a sampler the sharded path reuses as they are.
struct sampler_access {
  static const auto& chain(const sampler& s) noexcept { return s.chain_; }
  static const processors& procs(const sampler& s) noexcept { return s.procs_; }
  static void processed_logprobs(row_state& st, row_result& r, workspace& ws, std::span<token_logprob> top) {
    sampler::processed_logprobs(st, r, ws, top);
  }
};
}  // namespace detail

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
  path route() const noexcept { return path_; }

  // The path rows of sampler s take.
  static path route_of(const sampler& s) noexcept {
    const sampling_params& p = s.params();
    // Any knob the table (engine/knobs.hpp) marks gather, when it acts, gathers the row.
    for (const knob& k : knobs)
      if (k.shard == shard_rule::gather && k.on && k.on(p)) return path::gather;
    const float t = temperature_of(s);
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
    index_ = index;
    raw_ = slice.data();
    raw_type_ = dtype_of<T>;
    proc_ = nullptr;
    v0_ = v0;
    n_ = slice.size();
    vocab_ = vocab;
    rq_ = &rq;
    ws_ = &ws;
    done_ = false;
    result_ = {};
    bytes_ = 0;
    has_cut_ = has_raw_ = pre_done_ = false;
    rounds_ = 0;
    cur_ = 0;
    out_[0].clear(0);
    ws.reserve(n_);
    if (vocab == 0) return finish({.status = status::empty_row});
    if (!detail::sampler_access::procs(*s_).fits(vocab, rq)) return finish({.status = status::invalid_input});
    if (path_ == path::gather) {
      out().row.resize(n_ * sizeof(T));
      if (n_) std::memcpy(out().row.data(), slice.data(), n_ * sizeof(T));
      phase_ = phase::gathered;
      return sent();
    }
    if (detail::sampler_access::procs(*s_).active(rq))
      proc_ = detail::sampler_access::procs(*s_).apply_slice(slice, v0, vocab, ws, rq);
    std::size_t want = 0;
    if (path_ == path::greedy) {  // one pass: the argmax is the shard's best key and its maximum
      const detail::argmax_result a = visit_proc([&](const auto* x) { return detail::argmax(x, n_); });
      out().max = a.value;
      if (a.index >= 0)
        out().keys.push_back(detail::rank_key(a.value, global(static_cast<std::int32_t>(a.index))));
    } else {
      out().max = visit_proc([&](const auto* x) { return detail::max_value(x, n_); });
    }
    if (path_ == path::top_k) want = k_ + 1;
    if (path_ == path::top_p) want = std::max(budget_, n_lp_);
    if (path_ == path::dense && !raw_mode_) want = n_lp_;
    if (path_ != path::greedy) select_keys(want, /*raw=*/false, out().keys);
    // (a shard asked for at least its whole slice sent every candidate it has)
    out().truncated = want > 0 && want < n_ && out().keys.size() == want;
    if (raw_mode_ && lp_ >= 0) {
      out().raw_max = visit_raw([&](const auto* x) { return detail::max_value(x, n_); });
      select_keys(n_lp_, /*raw=*/true, out().raw_keys);
    }
    phase_ = phase::stats;
    sent();
  }

  bool done() const noexcept { return done_; }
  // This shard's message for the current round (valid until step()).
  const shard_message& outgoing() const noexcept { return out_[cur_]; }

  // One round: all[i] is shard i's outgoing(), shards in vocabulary order, this one included.
  template <class Messages>
  void step(const Messages& all) {
    if (done_) return;
    for (const shard_message& m : all)
      if (m.round != outgoing().round)
        throw std::invalid_argument("nucleus::shard_sampler: a message of round " + std::to_string(m.round) +
                                    " arrived in round " + std::to_string(outgoing().round));
    switch (phase_) {
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
    row_result r = result_;
    const std::size_t n = std::min<std::size_t>(top.size(), r.top_count);
    std::copy_n(top_.begin(), n, top.begin());
    r.top_count = static_cast<std::uint32_t>(n);
    return r;
  }
  // Rounds this row took, and the bytes this shard sent in them (shard_message::wire_size).
  std::size_t rounds() const noexcept { return rounds_; }
  std::size_t bytes_sent() const noexcept { return bytes_; }

 private:
  enum class phase : std::uint8_t {
    gathered,
    stats,
    ties,
    mass,
    hist,
    bin,
    draw_mass,
    token,
    rank,
    raw_norm
  };
  using any_chain =
      std::remove_cvref_t<decltype(detail::sampler_access::chain(std::declval<const sampler&>()))>;

  static float temperature_of(const sampler& s) noexcept {
    const float t = s.params().temperature;
    return detail::chain_temperature(s.order(), t);  // as the preset's chain
  }

  // The sampler's chain with top-p switched off: what runs on survivors top-p has already cut.
  static any_chain without_top_p(const any_chain& c) {
    return std::visit(
        [](const auto& ch) -> any_chain {
          auto stages = ch.stages();
          std::get<top_p_stage>(stages).p = 1.0f;
          return std::remove_cvref_t<decltype(ch)>(stages);
        },
        c);
  }

  // The path and thresholds of sampler s (cheap: a few comparisons and a copy of its stage values).
  void plan(const sampler& s) {
    s_ = &s;
    rest_ = without_top_p(detail::sampler_access::chain(s));
    const sampling_params& p = s.params();
    lp_ = p.logprobs;
    n_lp_ = lp_ > 0 ? static_cast<std::size_t>(lp_) : 0;
    raw_mode_ = p.logprobs_mode == logprob_mode::raw;
    const engine_order o = s.order();
    const float t = temperature_of(s);
    const float inv = t == 0.0f ? 0.0f : 1.0f / t;
    path_ = route_of(s);
    k_ = p.top_k > 0 ? static_cast<std::size_t>(p.top_k) : 0;
    keep_ties_ = o == engine_order::vllm || o == engine_order::hf;
    top_p_ = p.top_p;
    min_p_ = p.min_p;
    log_min_p_ = std::log(p.min_p);
    min_p_first_ = o == engine_order::vllm;
    inv_draw_ = inv;
    inv_cut_ = o == engine_order::llama_cpp ? 1.0f : inv;  // llama.cpp's temperature comes last
    // vLLM's min-p runs before top-k: top-k then sees the min-p survivors, not the dense row.
    keys_in_id_order_ = o == engine_order::vllm && p.min_p > 0.0f;
    key_ = p.seed;
  }

  template <class F>
  decltype(auto) visit_raw(F&& f) const {
    return detail::visit_logits(raw_, raw_type_, std::forward<F>(f));
  }
  // The processed slice (the raw one when no processor acts on this row).
  template <class F>
  decltype(auto) visit_proc(F&& f) const {
    if (proc_) return f(proc_);
    return visit_raw(std::forward<F>(f));
  }
  // This shard's candidates as the chain sees them after the row's maximum is known: the slice
  // itself, or (for a row holding +inf) its +inf tokens at logit 0 in ws.vals / ws.ids.
  template <class F>
  decltype(auto) visit_cands(F&& f) const {
    if (inf_row_) return f(static_cast<const float*>(ws_->vals.data()));
    return visit_proc(std::forward<F>(f));
  }
  const std::int32_t* cand_ids() const noexcept { return inf_row_ ? ws_->ids.data() : nullptr; }
  // The candidates still in play for the current round (after the thresholds narrowed them).
  template <class F>
  decltype(auto) visit_pre(F&& f) const {
    if (pre_compact_) return f(static_cast<const float*>(ws_->vals.data()));
    return visit_cands(std::forward<F>(f));
  }
  const std::int32_t* pre_ids() const noexcept { return pre_compact_ ? ws_->ids.data() : nullptr; }

  // This round's message is built in the other buffer, so that shards still reading the last one
  // (on other threads) see it unchanged until every shard has stepped.
  shard_message& out() noexcept { return out_[cur_]; }
  void next_message() {
    cur_ ^= 1;
    out_[cur_].clear(static_cast<std::uint32_t>(rounds_));
  }

  void sent() {
    bytes_ += out().wire_size();
    ++rounds_;
  }
  void finish(row_result r) {
    result_ = r;
    done_ = true;
  }
  std::int32_t global(std::int32_t local) const noexcept { return static_cast<std::int32_t>(v0_) + local; }

  // This shard's `want` best keys (processed or raw), with global ids.
  void select_keys(std::size_t want, bool raw, std::vector<std::uint64_t>& out) {
    out.clear();
    want = std::min(want, n_);  // never more than the slice: a huge top_k costs no more than k = n
    if (want == 0) return;
    std::uint64_t* keys = ws_->keys.ensure(detail::select_capacity(want));
    auto sel = [&](const auto* x) { return detail::select_top_k(x, nullptr, n_, want, keys); };
    const std::size_t c = raw ? visit_raw(sel) : visit_proc(sel);
    for (std::size_t i = 0; i < c; ++i)
      out.push_back(detail::rank_key(detail::key_value(keys[i]), global(detail::key_id(keys[i]))));
  }

  // Every shard's keys of one field, merged best first; `exact` is how many of them are the row's
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
    raw_max_ = raw_mx;
    if (!(mx > -detail::inf())) return finish({.status = status::no_candidates});
    inf_row_ = mx == detail::inf();
    m_ = inf_row_ ? 0.0f : mx;
    if (inf_row_) {  // the chain's rule: only the +inf tokens stay, at logit 0 (row_state::max_logit)
      const std::size_t c = visit_proc([&](const auto* x) {
        return detail::compact_ge(x, nullptr, n_, 0.0f, 1.0f, detail::inf(), ws_->vals.data(),
                                  ws_->ids.data());
      });
      std::fill_n(ws_->vals.data(), c, 0.0f);
      cands_n_ = c;
    } else {
      cands_n_ = n_;
    }
    exact_ = merge_keys(all, &shard_message::keys, merged_);
    merge_keys(all, &shard_message::raw_keys, merged_raw_);
    switch (path_) {
      case path::greedy:
        return finish_greedy();
      case path::top_k: {
        const bool more_ties = keep_ties_ && merged_.size() > k_ &&
                               detail::key_value(merged_[k_]) == detail::key_value(merged_[k_ - 1]);
        merged_.resize(std::min(merged_.size(), more_ties ? k_ : k_ + 1));
        if (!more_ties) return finish_on_keys(merged_, !keys_in_id_order_ && k_ < vocab_, chain());
        const float tie_value = detail::key_value(merged_[k_ - 1]);
        next_message();
        std::uint64_t* keys = ws_->keys.ensure(n_ + 1);
        const std::size_t c = visit_proc([&](const auto* x) {
          return detail::collect_ties(x, nullptr, n_, tie_value, ~std::uint64_t{0}, keys, 0, n_);
        });
        for (std::size_t i = 0; i < c; ++i)
          out().keys.push_back(detail::rank_key(tie_value, global(detail::key_id(keys[i]))));
        std::sort(out().keys.begin(), out().keys.end(), std::greater<>{});  // sent best first
        phase_ = phase::ties;
        return sent();
      }
      case path::top_p:
        next_message();
        narrow_pre();
        out().mass = cand_mass(inv_cut_, nullptr);
        phase_ = phase::mass;
        return sent();
      case path::dense:
        return start_draw();
      case path::gather:
        return;
    }
  }

  template <class Messages>
  void after_ties(const Messages& all) {
    // The first k, then every tie of the k-th (some of which are among the first k).
    merge_keys(all, &shard_message::keys, members_);
    merged_.insert(merged_.end(), members_.begin(), members_.end());
    std::sort(merged_.begin(), merged_.end(), std::greater<>{});
    merged_.erase(std::unique(merged_.begin(), merged_.end()), merged_.end());
    finish_on_keys(merged_, !keys_in_id_order_ && k_ < vocab_, chain());
  }

  // --- top-p ---------------------------------------------------------------------------------
  template <class Messages>
  void after_mass(const Messages& all) {
    detail::wsum total = 0;
    for (const shard_message& m : all) total += m.mass;
    bound_ = detail::mass_bound(top_p_, total);
    // Walk the leaders that are exact: their masses before each one are the row's.
    detail::wsum before = 0;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < exact_; ++i) {
      float v = detail::key_value(merged_[i]);
      if (inf_row_) {
        if (v != detail::inf()) break;  // the +inf tokens come first; nothing else is a candidate
        v = 0.0f;
      }
      if (!passes_pre(v)) break;  // thresholds are monotone: all later ones fail too
      if (!(before < bound_)) break;
      before += detail::weight(detail::exp_scalar(detail::scaled(v, m_, inv_cut_)));
      kept = i + 1;
    }
    if (!(before < bound_)) {  // the nucleus lies within the leaders
      merged_.resize(kept);
      return finish_on_keys(merged_, false, *rest_);
    }
    // Spill: top-p's own histogram over the whole row, then its edge bin. First, as top-p does, the
    // tokens that cannot be reached go: all those below (1 - p) * Z / (2 V) together hold less than
    // the share the cut leaves out (V >= the candidates, so this keeps a superset of top-p's).
    const double floor_w =
        (1.0 - static_cast<double>(top_p_)) * detail::to_double(total) / (2.0 * static_cast<double>(vocab_));
    narrow(m_, inv_cut_, static_cast<float>(std::log(floor_w)));
    next_message();
    float* e = ws_->probs.ensure(pre_n_);
    visit_pre([&](const auto* x) { detail::exp_store(x, pre_n_, m_, inv_cut_, e); });
    std::vector<detail::wsum>& h = out().hist;
    h.assign(detail::hist_bins, 0);
    constexpr float last_bin = static_cast<float>(detail::hist_bins - 1);
    std::size_t used = 0;
    visit_pre([&](const auto* x) {
      for (std::size_t i = 0; i < pre_n_; ++i) {
        const float b = detail::scaled(to_float(x[i]), m_, inv_cut_) * -detail::top_p_bins_per_unit;
        const std::size_t bin = b < last_bin ? static_cast<std::uint32_t>(b) : detail::hist_bins - 1;
        const std::uint64_t w = detail::weight(e[i]);
        h[bin] += w;
        if (w) used = std::max(used, bin + 1);
      }
    });
    h.resize(used);  // empty bins past the last used one are not sent
    phase_ = phase::hist;
    sent();
  }

  template <class Messages>
  void after_hist(const Messages& all) {
    detail::wsum before = 0;
    std::uint32_t edge = 0;
    for (; edge < detail::hist_bins; ++edge) {
      detail::wsum mass = 0;
      for (const shard_message& m : all)
        if (edge < m.hist.size()) mass += m.hist[edge];
      if (!(before + mass < bound_)) break;
      before += mass;
    }
    if (edge == detail::hist_bins)
      return start_draw();  // unreachable (the bins hold the total); as top-p: no cut
    before_ = before;
    next_message();
    const float hi = edge + 1 < detail::hist_bins ? static_cast<float>(edge + 1) : detail::inf();
    std::uint64_t* keys = ws_->keys.ensure(pre_n_ + 1);
    const std::size_t c = visit_pre([&](const auto* x) {
      return detail::collect_bin(x, pre_ids(), pre_n_, m_, inv_cut_, -detail::top_p_bins_per_unit,
                                 static_cast<float>(edge), hi, keys);
    });
    for (std::size_t i = 0; i < c; ++i)
      out().keys.push_back(detail::rank_key(detail::key_value(keys[i]), global(detail::key_id(keys[i]))));
    std::sort(out().keys.begin(), out().keys.end(), std::greater<>{});  // sent best first
    phase_ = phase::bin;
    sent();
  }

  template <class Messages>
  void after_bin(const Messages& all) {
    merge_keys(all, &shard_message::keys, members_);
    const std::size_t cut = detail::walk_cut(members_.data(), members_.size(), before_, bound_, m_, inv_cut_);
    cut_key_ = members_.empty() ? ~std::uint64_t{0} : members_[cut];
    has_cut_ = true;
    start_draw();
  }

  // --- the draw over survivors spread across shards ---------------------------------------------
  void start_draw() {
    next_message();
    narrow_pre();
    narrow_post();
    out().mass = cand_mass(inv_draw_, ws_->blocks.ensure(pre_n_ / detail::block_elems + 1));
    phase_ = phase::draw_mass;
    sent();
  }

  template <class Messages>
  void after_draw_mass(const Messages& all) {
    total_ = 0;
    for (const shard_message& m : all) total_ += m.mass;
    if (total_ == 0) return finish({.status = status::no_candidates});  // unreachable: the max weighs 2^48
    const detail::wsum point = detail::draw_point(draw_key{key_, rq_->position, rq_->stream}, total_);
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
    if (owner == index_) {
      const std::int64_t i = visit_pre([&](const auto* x) {
        return detail::pick(x, pre_n_, m_, inv_draw_, ws_->blocks.data(), point - before,
                            ws_->block_scratch.data());
      });
      if (i >= 0) {
        const auto at = static_cast<std::size_t>(i);
        const std::int32_t local = pre_ids() ? pre_ids()[at] : static_cast<std::int32_t>(at);
        out().token = global(local);
        out().max = visit_pre([&](const auto* x) { return to_float(x[at]); });
        out().raw_max = visit_raw([&](const auto* x) { return to_float(x[local]); });
      }
    }
    phase_ = phase::token;
    sent();
  }

  template <class Messages>
  void after_token(const Messages& all) {
    std::int32_t tok = -1;
    for (const shard_message& m : all)
      if (m.token >= 0) {
        tok = m.token;
        x_tok_ = m.max;
        x_raw_ = m.raw_max;
        has_raw_ = true;
      }
    if (tok < 0) return finish({.status = status::no_candidates});  // unreachable
    const double log_z = std::log(detail::to_double(total_));
    row_result r{tok, static_cast<float>(static_cast<double>(detail::scaled(x_tok_, m_, inv_draw_)) - log_z),
                 0, 0, status::ok};
    result_ = r;
    if (lp_ < 0) return finish(r);
    if (raw_mode_) return start_raw();
    // Processed: the top-n are the leaders among the survivors; the rank needs one more round.
    std::size_t c = 0;
    for (std::size_t i = 0; i < merged_.size() && c < n_lp_; ++i) {
      float v = detail::key_value(merged_[i]);
      if (inf_row_) {
        if (v != detail::inf()) break;
        v = 0.0f;
      }
      // (the cut's key holds candidate values: 0 for a +inf row's tokens)
      if (!passes_pre(v) || !passes_post(v)) break;
      if (has_cut_ && detail::rank_key(v, detail::key_id(merged_[i])) < cut_key_) break;
      top_[c++] = {detail::key_id(merged_[i]),
                   static_cast<float>(static_cast<double>(detail::scaled(v, m_, inv_draw_)) - log_z)};
    }
    result_.top_count = static_cast<std::uint32_t>(c);
    next_message();
    out().count = visit_pre([&](const auto* x) { return detail::count_greater(x, pre_n_, x_tok_); });
    phase_ = phase::rank;
    sent();
  }

  // The token's rank: 1 + the tokens ranked above it, summed over the shards.
  template <class Messages>
  void after_rank(const Messages& all) {
    std::uint64_t above = 0;
    for (const shard_message& m : all) above += m.count;
    result_.rank = static_cast<std::int32_t>(above + 1);
    finish(result_);
  }

  // --- raw logprobs: the raw row's normalizer and the token's raw rank ----------------------------
  void start_raw() {
    next_message();
    out().raw_max = -detail::inf();
    if (raw_max_ == detail::inf()) {
      out().raw_count = visit_raw(
          [&](const auto* x) { return detail::count_greater(x, n_, std::numeric_limits<float>::max()); });
    } else if (raw_max_ > -detail::inf()) {
      out().raw_mass =
          visit_raw([&](const auto* x) { return detail::exp_sum(x, n_, raw_max_, 1.0f, nullptr); });
    }
    const auto t = static_cast<std::size_t>(result_.token);
    if (!has_raw_ && t >= v0_ && t - v0_ < n_) {
      out().token = result_.token;
      out().raw_max = visit_raw([&](const auto* x) { return to_float(x[t - v0_]); });
    }
    phase_ = phase::raw_norm;
    sent();
  }

  template <class Messages>
  void after_raw_norm(const Messages& all) {
    detail::wsum mass = 0;
    std::uint64_t infs = 0;
    for (const shard_message& m : all) {
      mass += m.raw_mass;
      infs += m.raw_count;
      if (!has_raw_ && m.token >= 0) x_raw_ = m.raw_max;
    }
    const detail::raw_normalizer norm = detail::normalizer_of_parts(raw_max_, infs, mass);
    result_.logprob = norm(x_raw_);
    const std::size_t shown = detail::raw_top_entries(
        norm, std::span<const std::uint64_t>(merged_raw_).first(std::min(n_lp_, merged_raw_.size())),
        std::span<token_logprob>(top_));
    result_.top_count = static_cast<std::uint32_t>(shown);
    next_message();  // the rank round, as the processed one (after_rank) but in the raw row
    out().count = visit_raw([&](const auto* x) { return detail::count_greater(x, n_, x_raw_); });
    phase_ = phase::rank;
    sent();
  }

  // --- finishing where every shard holds the survivors ------------------------------------------
  void finish_greedy() {
    row_result r{detail::key_id(merged_[0]), 0.0f, 0, 0, status::ok};
    result_ = r;
    if (lp_ < 0) return finish(r);
    if (raw_mode_) return start_raw();
    result_.rank = 1;
    if (n_lp_ > 0) {
      top_[0] = {r.token, 0.0f};
      result_.top_count = 1;
    }
    finish(result_);
  }

  // Runs chain c on the candidates in `keys` (the row's survivors so far, logits as in the row),
  // in rank order with the sorted flag or in id order without: the state the whole row would be in.
  void finish_on_keys(std::span<const std::uint64_t> keys, bool rank_order, const any_chain& c) {
    const std::size_t n = keys.size();
    list_.assign(keys.begin(), keys.end());
    if (!rank_order)
      std::sort(list_.begin(), list_.end(),
                [](std::uint64_t a, std::uint64_t b) { return detail::key_id(a) < detail::key_id(b); });
    ws_->reserve(n);
    float* v = ws_->vals.data();
    std::int32_t* id = ws_->ids.data();
    for (std::size_t i = 0; i < n; ++i) {
      v[i] = detail::key_value(list_[i]);
      id[i] = detail::key_id(list_[i]);
    }
    row_state s(std::span<const float>(v, n), *ws_);
    s.assign(n, rank_order);
    const sample_result d = std::visit(
        [&](const auto& ch) {
          return ch.finish(s, draw_key{key_, rq_->position, rq_->stream});
        },
        c);
    row_result r{d.token, d.logprob, 0, 0, d.status};
    result_ = r;
    if (d.status != status::ok || lp_ < 0) return finish(r);
    if (raw_mode_) return start_raw();
    detail::sampler_access::processed_logprobs(s, result_, *ws_,
                                               std::span<token_logprob>(top_.data(), n_lp_));
    finish(result_);
  }

  template <class Messages>
  void finish_gathered(const Messages& all) {
    std::size_t bytes = 0;
    for (const shard_message& m : all) bytes += m.row.size();
    row_.resize(bytes);
    std::size_t at = 0;
    for (const shard_message& m : all) {
      if (!m.row.empty()) std::memcpy(row_.data() + at, m.row.data(), m.row.size());
      at += m.row.size();
    }
    ws_->reserve(vocab_);
    finish(detail::visit_logits(row_.data(), raw_type_, [&](const auto* x) {
      using T = std::remove_cvref_t<decltype(*x)>;
      return s_->sample(std::span<const T>(x, bytes / sizeof(T)), *ws_, *rq_,
                        std::span<token_logprob>(top_.data(), n_lp_));
    }));
  }

  // --- this shard's candidates under the thresholds ------------------------------------------------
  const any_chain& chain() const noexcept { return detail::sampler_access::chain(*s_); }

  bool passes_pre(float v) const noexcept {
    return !(min_p_first_ && min_p_ > 0.0f) || detail::scaled(v, m_, inv_cut_) >= log_min_p_;
  }
  bool passes_post(float v) const noexcept {
    return !(!min_p_first_ && min_p_ > 0.0f) || detail::scaled(v, m_, inv_cut_) >= log_min_p_;
  }

  // The candidates top-p sums over: after the min-p that comes before it (vLLM).
  void narrow_pre() {
    if (pre_done_) return;
    pre_done_ = true;
    pre_n_ = cands_n_;
    pre_compact_ = inf_row_;
    if (min_p_first_ && min_p_ > 0.0f) narrow(m_, inv_cut_, log_min_p_);
  }
  // Then the survivors of the draw: top-p's cut and the min-p after it.
  void narrow_post() {
    if (has_cut_) {
      const float cut_v = detail::key_value(cut_key_);
      narrow(0.0f, 1.0f, cut_v);
      const std::int32_t cut_id = detail::key_id(cut_key_);
      std::size_t o = 0;
      float* v = ws_->vals.data();
      std::int32_t* id = ws_->ids.data();
      for (std::size_t i = 0; i < pre_n_; ++i) {
        if (v[i] == cut_v && global(id[i]) > cut_id) continue;
        v[o] = v[i];
        id[o] = id[i];
        ++o;
      }
      pre_n_ = o;
    }
    if (!min_p_first_ && min_p_ > 0.0f) narrow(m_, inv_cut_, log_min_p_);
  }
  // Keeps the candidates with (x - shift) * scale >= threshold in ws.vals / ws.ids (local ids).
  void narrow(float shift, float scale, float threshold) {
    const std::size_t c = visit_pre([&](const auto* x) {
      return detail::compact_ge(x, pre_ids(), pre_n_, shift, scale, threshold, ws_->vals.data(),
                                ws_->ids.data());
    });
    pre_n_ = c;
    pre_compact_ = true;
  }

  detail::wsum cand_mass(float inv, std::uint64_t* blocks) const {
    return visit_pre([&](const auto* x) { return detail::exp_sum(x, pre_n_, m_, inv, blocks); });
  }

  // --- configuration ----------------------------------------------------------------------------
  const sampler* s_ = nullptr;
  std::optional<any_chain> rest_;
  path path_ = path::gather;
  std::size_t budget_ = default_budget;
  int lp_ = -1;
  std::size_t n_lp_ = 0;
  bool raw_mode_ = true;
  std::size_t k_ = 0;
  bool keep_ties_ = false;
  bool keys_in_id_order_ = false;
  float top_p_ = 1.0f, min_p_ = 0.0f, log_min_p_ = 0.0f;
  bool min_p_first_ = false;
  float inv_draw_ = 1.0f, inv_cut_ = 1.0f;
  std::uint64_t key_ = 0;

  // --- one row ----------------------------------------------------------------------------------
  const void* raw_ = nullptr;
  logit_dtype raw_type_ = logit_dtype::f32;
  const float* proc_ = nullptr;
  std::size_t v0_ = 0, n_ = 0, vocab_ = 0;
  const row_request* rq_ = nullptr;
  workspace* ws_ = nullptr;
  phase phase_ = phase::stats;
  bool done_ = false;
  row_result result_{};
  std::array<token_logprob, max_logprobs> top_{};
  shard_message out_[2];
  unsigned cur_ = 0;
  std::size_t bytes_ = 0, rounds_ = 0;
  float m_ = 0.0f, raw_max_ = -detail::inf();
  bool inf_row_ = false;
  std::size_t cands_n_ = 0, pre_n_ = 0;
  bool pre_compact_ = false, pre_done_ = false;
  std::size_t index_ = 0;
  std::size_t exact_ = 0;
  std::vector<std::uint64_t> merged_, merged_raw_, members_, list_, merge_tmp_;
  std::vector<std::byte> row_;
  detail::wsum bound_ = 0, before_ = 0, total_ = 0;
  std::uint64_t cut_key_ = 0;
  bool has_cut_ = false;
  float x_tok_ = 0.0f, x_raw_ = 0.0f;
  bool has_raw_ = false;
};

}  // namespace nucleus
