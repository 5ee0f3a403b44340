// The stage contract (stage_info, read through stage_traits<S>) and the plan a chain works out from
// it at compile time (row_plan): what may hold of the row before each stage runs.
#pragma once

namespace nucleus {

// A stage's contract, read by the chain at compile time (stage_traits<S>): each field drives code.
// A stage that cuts declares nothing: every stage may narrow the candidates.
struct stage_info {
  bool terminal = false;   // ends a chain: turns the candidates into one token
  bool needs_key = false;  // uses the draw_key's randomness
  bool sorts = false;      // may leave the candidates in rank order (later cuts skip their sort)
  bool tempers = false;    // may change the temperature (T = 0 turns the row greedy)
};

namespace detail {
template <class S>
consteval stage_info declared_info() {
  static_assert(
      requires { stage_info{S::info}; },
      "nucleus: a stage declares `static constexpr nucleus::stage_info info{...};` "
      "(`info{}` for a stage that only cuts)");
  if constexpr (requires { stage_info{S::info}; }) {
    return S::info;
  } else {
    return {};
  }
}
}  // namespace detail

template <class S>
struct stage_traits {
  static constexpr stage_info info = detail::declared_info<S>();
  static constexpr bool terminal = info.terminal;
  static constexpr bool needs_key = info.needs_key;
  static constexpr bool sorts = info.sorts;
  static constexpr bool tempers = info.tempers;
};

// What a chain knows of its row before a stage runs, worked out at compile time from the stage_info
// of the stages before it. A false "may" is a promise: that case cannot arise, and code that reads
// the plan compiles without its branch; true leaves the decision to the row's run-time flag.
struct row_plan {
  bool may_be_sorted = true;  // the candidates may be in rank order (a stage that sorts ran)
  bool may_be_greedy = true;  // T may be 0 (a stage that tempers ran)

  constexpr row_plan after(const stage_info& s) const noexcept {
    return {may_be_sorted || s.sorts, may_be_greedy || s.tempers};
  }
  friend constexpr bool operator==(const row_plan&, const row_plan&) = default;
};
// The caller's logits, untouched: in id order, T = 1. (A row_state prepared elsewhere, as the engine
// and the sharded sampler do, gets the default plan: anything may hold.)
inline constexpr row_plan fresh_row{false, false};

// Passed to a stage's apply / finish that reads the plan: `template <row_plan P> void
// apply(row_state&, plan<P>) const`. Stages that do not read it keep `apply(row_state&)`.
template <row_plan P>
struct plan {
  static constexpr row_plan value = P;
};

}  // namespace nucleus
