// Deterministic cases (row, chain, draw key) for the identity recorder and the reference sweep, and
// the bridge from a runtime chain description to the library's compile-time chains.
#pragma once

#include <nucleus/nucleus.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "reference/reference.hpp"

namespace nucleus_cases {

using nucleus_ref::op;

enum class terminal { categorical, argmax };

template <op... Ops>
struct shape {
  static constexpr std::size_t size = sizeof...(Ops);
  static constexpr std::array<op, sizeof...(Ops)> ops{Ops...};
};

// The chain shapes the cases use; parameters vary per case.
using shapes =
    std::tuple<shape<>,  // a lone terminal
               shape<op::temperature>, shape<op::top_k>, shape<op::top_p>, shape<op::min_p>,
               shape<op::temperature, op::top_k>, shape<op::top_k, op::top_p, op::min_p, op::temperature>,
               shape<op::temperature, op::top_p>, shape<op::min_p, op::temperature>,
               shape<op::top_p, op::temperature, op::top_k>,
               shape<op::temperature, op::min_p, op::top_p, op::temperature>,
               shape<op::temperature, op::top_k, op::top_p, op::min_p>, shape<op::top_k, op::top_k>,
               shape<op::top_p, op::top_p>, shape<op::min_p, op::top_k, op::temperature, op::top_p>,
               shape<op::temperature, op::temperature>>;
inline constexpr std::size_t shape_count = std::tuple_size_v<shapes>;

struct chain_config {
  std::size_t shape = 0;
  std::vector<nucleus_ref::stage> stages;  // one per op of the shape, in order
  terminal term = terminal::categorical;
};

struct test_case {
  std::size_t index = 0;
  nucleus_ref::row_kind kind = nucleus_ref::row_kind::uniform;
  std::vector<float> row;
  chain_config chain;
  nucleus::draw_key key;
};

// Parameters are stored as the float (or int) the library receives, so both sides see one value.
inline double random_parameter(op o, std::size_t V, nucleus_ref::rng& g) {
  auto f = [](double x) { return static_cast<double>(static_cast<float>(x)); };
  std::uint64_t pick = g.below(10);
  switch (o) {
    case op::temperature:
      if (pick == 0) return 0.0;
      if (pick == 1) return 1.0;
      if (pick == 2) return f(0.05);
      if (pick == 3) return f(0.7);
      return f(g.uniform(0.1, 2.5));
    case op::top_k:
    case op::top_k_ties:
      if (pick == 0) return 0.0;
      if (pick == 1) return 1.0;
      if (pick == 2) return static_cast<double>(V);
      if (pick == 3) return static_cast<double>(V + 5);
      if (pick == 4) return 40.0;
      if (pick == 5) return -3.0;
      return static_cast<double>(1 + g.below(std::max<std::size_t>(V, 1)));
    case op::top_p:
      if (pick == 0) return 1.0;
      if (pick == 1) return f(0.9);
      if (pick == 2) return f(0.95);
      if (pick == 3) return f(1e-6);
      if (pick == 4) return f(0.5);
      return f(g.uniform(0.01, 1.0));
    case op::min_p:
      if (pick == 0) return 0.0;
      if (pick == 1) return f(0.05);
      if (pick == 2) return 1.0;
      if (pick == 3) return f(1e-4);
      if (pick == 4) return f(0.1);
      return f(g.uniform(0.0, 1.0));
  }
  return 0.0;
}

inline std::size_t random_vocab(nucleus_ref::rng& g, std::size_t index) {
  if (index % 997 == 500) return 151936;
  if (index % 211 == 100) return 32000 + g.below(2000);
  if (g.below(5) == 0) return 1 + g.below(16);
  return static_cast<std::size_t>(std::exp(g.uniform(0.0, std::log(5000.0))));  // 1 .. 5000, log-uniform
}

inline nucleus_ref::row_kind random_kind(nucleus_ref::rng& g) {
  using nucleus_ref::row_kind;
  static constexpr row_kind weighted[] = {
      row_kind::uniform, row_kind::uniform, row_kind::uniform,   row_kind::peaky,   row_kind::peaky,
      row_kind::peaky,   row_kind::flat,    row_kind::all_equal, row_kind::neg_inf, row_kind::pos_inf,
      row_kind::nan,     row_kind::huge,    row_kind::large,     row_kind::large,   row_kind::no_candidates};
  return weighted[g.below(std::size(weighted))];
}

template <std::size_t... I>
constexpr std::array<std::size_t, shape_count> shape_sizes(std::index_sequence<I...>) {
  return {std::tuple_element_t<I, shapes>::size...};
}
template <std::size_t... I>
std::vector<op> shape_ops(std::size_t s, std::index_sequence<I...>) {
  std::vector<op> out;
  ((I == s ? (void)(out.assign(std::tuple_element_t<I, shapes>::ops.begin(),
                               std::tuple_element_t<I, shapes>::ops.end()))
           : void()),
   ...);
  return out;
}

inline test_case make_case(std::size_t index) {
  std::uint64_t seed = 0x6E75636C65757300ull ^ (index * 0x9E3779B97F4A7C15ull);
  nucleus_ref::rng g(seed);
  test_case c;
  c.index = index;
  std::size_t V = random_vocab(g, index);
  if (index % 503 == 7) V = 0;  // a few empty rows
  c.kind = random_kind(g);
  c.row = nucleus_ref::make_row(c.kind, V, g);
  c.chain.shape = static_cast<std::size_t>(g.below(shape_count));
  for (op o : shape_ops(c.chain.shape, std::make_index_sequence<shape_count>{}))
    c.chain.stages.push_back({o, random_parameter(o, V, g)});
  c.chain.term = g.below(6) == 0 ? terminal::argmax : terminal::categorical;
  c.key = nucleus::draw_key{g.next(), g.below(1u << 20)};
  return c;
}

// Calls fn(const test_case&) for cases 0 .. n-1; the same n always gives the same cases.
template <class F>
void for_each_case(std::size_t n, F&& fn) {
  for (std::size_t i = 0; i < n; ++i) fn(make_case(i));
}

// ---------------------------------------------------------------------------------------------
// The bridge to the library.

template <op O>
auto make_stage(double v) {
  if constexpr (O == op::temperature)
    return nucleus::temperature(static_cast<float>(v));
  else if constexpr (O == op::top_k)
    return nucleus::top_k(static_cast<int>(v));
  else if constexpr (O == op::top_k_ties)
    return nucleus::top_k(static_cast<int>(v), nucleus::ties::keep);
  else if constexpr (O == op::top_p)
    return nucleus::top_p(static_cast<float>(v));
  else
    return nucleus::min_p(static_cast<float>(v));
}

template <op... Ops, std::size_t... I>
auto build_proc(shape<Ops...>, const std::vector<nucleus_ref::stage>& st, std::index_sequence<I...>) {
  return (make_stage<Ops>(st[I].value) | ...);
}

struct no_proc {};  // a lone terminal has no processing part

// fn(proc, chain): proc is the processing part (no_proc for a lone terminal), chain is proc | terminal.
template <class F>
void with_chain(const chain_config& cfg, F&& fn) {
  auto run = [&]<std::size_t S>(std::integral_constant<std::size_t, S>) {
    using sh = std::tuple_element_t<S, shapes>;
    auto go = [&](auto term) {
      if constexpr (sh::size == 0) {
        fn(no_proc{}, term);
      } else {
        auto proc = build_proc(sh{}, cfg.stages, std::make_index_sequence<sh::size>{});
        fn(proc, proc | term);
      }
    };
    if (cfg.term == terminal::argmax)
      go(nucleus::argmax());
    else
      go(nucleus::categorical());
  };
  [&]<std::size_t... S>(std::index_sequence<S...>) {
    ((cfg.shape == S ? run(std::integral_constant<std::size_t, S>{}) : void()), ...);
  }
  (std::make_index_sequence<shape_count>{});
}

inline nucleus_ref::status to_ref(nucleus::status s) {
  switch (s) {
    case nucleus::status::ok:
      return nucleus_ref::status::ok;
    case nucleus::status::no_candidates:
      return nucleus_ref::status::no_candidates;
    case nucleus::status::empty_row:
      return nucleus_ref::status::empty_row;
    case nucleus::status::invalid_input:
      break;  // the core never reports it: let it match no reference status
  }
  return static_cast<nucleus_ref::status>(255);
}

inline nucleus_ref::observed observe(const nucleus::distribution& d) {
  nucleus_ref::observed o;
  o.st = to_ref(d.status());
  o.ids.assign(d.ids().begin(), d.ids().end());
  o.probs.assign(d.probs().begin(), d.probs().end());
  o.sorted = d.sorted();
  return o;
}

// The surviving ids in increasing order (a set comparison, whatever order the stage left).
inline std::vector<std::int32_t> sorted_ids(const nucleus_ref::observed& o) {
  auto ids = o.ids;
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Logits ln(p) for the given probabilities.
inline std::vector<float> log_row(std::initializer_list<double> probs) {
  std::vector<float> row;
  for (double p : probs) row.push_back(static_cast<float>(std::log(p)));
  return row;
}

// ---------------------------------------------------------------------------------------------
// Shared by the Catch2 tests (kept free of Catch2 so the recorder can include this header).

// The vocabularies every stage is checked at; big ones get fewer row kinds to keep the run short.
inline constexpr std::size_t sweep_vocabs[] = {1, 2, 7, 8, 9, 1000, 32000, 151936, 248320};

struct sweep_row {
  std::size_t V;
  nucleus_ref::row_kind kind;
  std::vector<float> row;
  bool big;  // V >= 32000: callers use fewer parameters
};

// fn(const sweep_row&) for every vocabulary and row kind (a few kinds only for the big vocabularies).
template <class F>
void for_each_sweep_row(std::uint64_t seed, F&& fn) {
  using nucleus_ref::row_kind;
  for (std::size_t V : sweep_vocabs) {
    nucleus_ref::rng g(seed ^ (V * 0xD1B54A32D192ED03ull));
    std::vector<row_kind> kinds(std::begin(nucleus_ref::all_row_kinds), std::end(nucleus_ref::all_row_kinds));
    if (V == 32000) kinds = {row_kind::uniform, row_kind::peaky, row_kind::nan, row_kind::large};
    if (V == 151936) kinds = {row_kind::peaky, row_kind::neg_inf};
    if (V == 248320) kinds = {row_kind::uniform, row_kind::pos_inf};
    for (row_kind k : kinds) fn(sweep_row{V, k, nucleus_ref::make_row(k, V, g), V >= 32000});
  }
}

// Collects failures without flooding the log: the count and the first few messages.
struct error_log {
  std::size_t count = 0;
  std::size_t checked = 0;
  std::string first;
  void add(const std::string& e) {
    ++checked;
    if (e.empty()) return;
    if (++count <= 5) first += e + "\n";
  }
  std::string summary() const {
    return std::to_string(count) + " of " + std::to_string(checked) + " checks failed; first:\n" + first;
  }
};

inline std::string with_kind(nucleus_ref::row_kind k, const std::string& e) {
  return e.empty() ? e : std::string("[") + nucleus_ref::to_string(k) + "] " + e;
}

// The library's distribution for (proc, row) against the reference chain `ref`.
template <class Proc>
std::string check_proc(const Proc& proc, std::span<const float> row, std::span<const nucleus_ref::stage> ref,
                       nucleus::workspace& ws, nucleus_ref::observed* out = nullptr) {
  nucleus_ref::observed o = observe(proc(row, ws));
  std::string e = nucleus_ref::check_distribution(row, ref, o);
  if (out) *out = std::move(o);
  return e;
}

// The reference's own survivors, for a draw with no processing part to observe.
inline nucleus_ref::observed nominal_observed(std::span<const float> row,
                                              std::span<const nucleus_ref::stage> ref) {
  nucleus_ref::observed o;
  auto d = nucleus_ref::process(row, ref);
  o.st = d.st;
  for (auto& e : d.entries) {
    o.ids.push_back(e.id);
    o.probs.push_back(static_cast<float>(e.prob));
  }
  return o;
}

// The draw r of a chain (its processing part observed as o) against the reference. Not a template:
// every chain type shares it.
inline std::string check_drawn(terminal term, std::span<const float> row,
                               std::span<const nucleus_ref::stage> stages, const nucleus_ref::observed& o,
                               nucleus::sample_result r) {
  std::vector<nucleus_ref::stage> with_greedy(stages.begin(), stages.end());
  if (term == terminal::argmax) with_greedy.push_back(nucleus_ref::temperature(0.0));
  std::string e = nucleus_ref::check_draw(row, with_greedy, o, to_ref(r.status), r.token, r.logprob);
  if (e.empty() && term == terminal::argmax && r.token != nucleus_ref::argmax(row))
    e = nucleus_ref::context(row, stages) + ": argmax terminal returned " + std::to_string(r.token);
  return e;
}

// Distribution of `proc` (if any) and a draw of `chain` (proc | terminal), both against the reference.
template <class Proc, class Chain>
std::string check_case(const Proc& proc, const Chain& chain, terminal term, std::span<const float> row,
                       std::span<const nucleus_ref::stage> stages, nucleus::workspace& ws,
                       nucleus::draw_key key) {
  nucleus_ref::observed o;
  if constexpr (std::is_same_v<Proc, no_proc>) {
    o = nominal_observed(row, stages);
  } else {
    std::string e = check_proc(proc, row, stages, ws, &o);
    if (!e.empty()) return e;
  }
  return check_drawn(term, row, stages, o, chain(row, ws, key));
}

}  // namespace nucleus_cases
