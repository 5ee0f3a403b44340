// Compile-time composition: stages are small value types; `a | b` flattens into one chain<S...>.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "nucleus/core/distribution.hpp"
#include "nucleus/core/draw_key.hpp"
#include "nucleus/core/logit_types.hpp"
#include "nucleus/core/materialize.hpp"
#include "nucleus/core/result.hpp"
#include "nucleus/core/row_state.hpp"
#include "nucleus/core/stage_info.hpp"
#include "nucleus/core/workspace.hpp"

namespace nucleus {

template <class... S>
class chain;

struct stage_base;

namespace detail {
[[noreturn]] inline void broken_contract(const char* what) {
  throw std::logic_error(std::string("nucleus: a stage ") + what);
}
template <class L, class R>
constexpr auto join(const L& l, const R& r);
}  // namespace detail

// Hosts operator| as a hidden friend of a non-template base, so it is defined once for all stages.
struct stage_base {
  template <class L, class R>
  requires std::derived_from<L, stage_base> && std::derived_from<R, stage_base>
  friend constexpr auto operator|(const L& l, const R& r) { return detail::join(l, r); }
};

template <class T>
concept pipeable = std::derived_from<std::remove_cvref_t<T>, stage_base>;

// A non-terminal stage: `void apply(row_state&) const`. A terminal: `sample_result finish(row_state&,
// draw_key) const`. Deriving from stage<Self> makes one stage callable like a chain of one.
template <class Self>
struct stage : stage_base {
  template <logit_type T>
  auto operator()(std::span<const T> logits, workspace& ws) const {
    return chain<Self>(static_cast<const Self&>(*this))(logits, ws);
  }
  template <logit_type T>
  auto operator()(std::span<const T> logits, workspace& ws, draw_key key) const {
    return chain<Self>(static_cast<const Self&>(*this))(logits, ws, key);
  }
  auto operator()(std::span<const float> logits, workspace& ws) const {
    return chain<Self>(static_cast<const Self&>(*this))(logits, ws);
  }
  auto operator()(std::span<const float> logits, workspace& ws, draw_key key) const {
    return chain<Self>(static_cast<const Self&>(*this))(logits, ws, key);
  }
};

template <class... S>
class chain : public stage_base {
  static constexpr std::size_t count = sizeof...(S);
  static constexpr std::array<bool, count + 1> flags{stage_traits<S>::terminal..., false};
  static constexpr bool ends_in_terminal = count > 0 && flags[count - 1];
  static constexpr std::size_t terminals = (std::size_t{0} + ... + (stage_traits<S>::terminal ? 1 : 0));
  static_assert(terminals <= 1 && (terminals == 0 || ends_in_terminal),
                "nucleus: a terminal stage (categorical(), argmax()) must be the last stage of a chain");

  using last_type = std::tuple_element_t<count - 1, std::tuple<S...>>;

 public:
  static constexpr bool terminal = ends_in_terminal;
  // A stage before the terminal that flips a coin of its own (xtc) needs the key too.
  static constexpr bool keyed_stages = ((stage_traits<S>::needs_key && !stage_traits<S>::terminal) || ...);
  static constexpr bool needs_key = keyed_stages || (ends_in_terminal && stage_traits<last_type>::needs_key);

  constexpr explicit chain(S... s) : stages_(std::move(s)...) {}
  constexpr explicit chain(std::tuple<S...> t) : stages_(std::move(t)) {}

  constexpr const std::tuple<S...>& stages() const noexcept { return stages_; }

  // The plan before stage I (I = count: after the last) of a row entering as `entry`.
  template <std::size_t I, row_plan Entry = fresh_row>
  static constexpr row_plan plan_before() noexcept {
    row_plan p = Entry;
    std::size_t i = 0;
    ((i++ < I ? (void)(p = p.after(stage_traits<S>::info)) : void()), ...);
    return p;
  }

  // Without a terminal: the processed distribution. Ending in argmax(): the greedy token.
  // Rows may hold float, bf16 or f16 logits (see logit_types.hpp).
  template <logit_type T>
  auto operator()(std::span<const T> logits, workspace& ws) const {
    static_assert(!needs_key,
                  "nucleus: this chain uses randomness (it draws, or has a keyed stage such as xtc()): "
                  "call it with a draw_key, chain(logits, ws, nucleus::draw_key{seed, position})");
    return run<fresh_row>(logits, ws, draw_key{});
  }

  // With a terminal: the drawn token. Without: the processed distribution, keyed stages using `key`.
  template <logit_type T>
  auto operator()(std::span<const T> logits, workspace& ws, draw_key key) const {
    return run<fresh_row>(logits, ws, key);
  }

  // The same for a std::span<const float> spelled any way that converts (a vector, an array).
  auto operator()(std::span<const float> logits, workspace& ws) const {
    return this->operator()<float>(logits, ws);
  }
  auto operator()(std::span<const float> logits, workspace& ws, draw_key key) const {
    return this->operator()<float>(logits, ws, key);
  }

  // Runs every non-terminal stage on a row already in a row_state (for code that prepares rows
  // itself, such as the batch sampler); then finish() draws with the terminal. Such a row may be in
  // any state, so these run with the default plan.
  void apply(row_state& s) const {
    static_assert(!keyed_stages,
                  "nucleus: this chain has a keyed stage such as xtc(): call apply(state, draw_key)");
    apply(s, draw_key{});
  }
  void apply(row_state& s, draw_key key) const {
    run_stages<row_plan{}>(s, key, std::make_index_sequence < ends_in_terminal ? count - 1 : count > {});
  }
  sample_result finish(row_state& s, draw_key key) const requires(ends_in_terminal) {
    return run_finish<row_plan{}>(s, key);
  }

 private:
  template <row_plan Entry, logit_type T>
  auto run(std::span<const T> logits, workspace& ws, draw_key key) const {
    row_state s(logits, ws);
    if constexpr (ends_in_terminal) {
      return run_finish<Entry>(s, key);
    } else {
      run_stages<Entry>(s, key, std::make_index_sequence<count>{});
      return materialize(s, plan<plan_before<count, Entry>()>{});
    }
  }
  template <row_plan Entry>
  sample_result run_finish(row_state& s, draw_key key) const {
    run_stages<Entry>(s, key, std::make_index_sequence<count - 1>{});
    constexpr row_plan at = plan_before<count - 1, Entry>();
    const last_type& t = std::get<count - 1>(stages_);
    if constexpr (requires { t.finish(s, key, plan<at>{}); }) {
      return t.finish(s, key, plan<at>{});
    } else {
      static_assert(
          requires {
            { t.finish(s, key) } -> std::same_as<sample_result>;
          },
          "nucleus: a terminal stage implements `sample_result finish(row_state&, draw_key) const`");
      return t.finish(s, key);
    }
  }

  template <row_plan P, class St>
  static void run_stage(const St& st, row_state& s, draw_key key) {
    const bool was_sorted = s.sorted(), was_greedy = s.greedy();
    const float inv = s.inv_temperature();
    if constexpr (stage_traits<St>::needs_key) {
      static_assert(
          requires { st.apply(s, key); },
          "nucleus: a stage that declares needs_key implements "
          "`void apply(row_state&, draw_key) const`");
      st.apply(s, key);
    } else if constexpr (requires { st.apply(s, plan<P>{}); }) {
      st.apply(s, plan<P>{});
    } else {
      static_assert(
          requires { st.apply(s); },
          "nucleus: a stage implements `void apply(row_state&) const` (or, to read the chain's "
          "plan, `template <row_plan P> void apply(row_state&, plan<P>) const`)");
      st.apply(s);
    }
    // The plans of the stages after this one rest on its stage_info: a stage that breaks it (a user
    // stage, say) is a programming error, caught here rather than as a wrong distribution.
    if (!stage_traits<St>::sorts && s.sorted() && !was_sorted)
      detail::broken_contract("left the candidates in rank order without declaring stage_info::sorts");
    if (!stage_traits<St>::tempers && (s.greedy() != was_greedy || s.inv_temperature() != inv))
      detail::broken_contract("changed the temperature without declaring stage_info::tempers");
  }
  template <row_plan Entry, std::size_t... I>
  void run_stages(row_state& s, draw_key key, std::index_sequence<I...>) const {
    // Every stage checks live() first; a stage after greedy (T = 0) has nothing to cut either, and
    // only a stage after one that tempers can find the row greedy.
    ((s.live() && !(plan_before<I, Entry>().may_be_greedy && s.greedy())
          ? run_stage<plan_before<I, Entry>()>(std::get<I>(stages_), s, key)
          : void()),
     ...);
    (void)key;
  }

  std::tuple<S...> stages_;
};

namespace detail {

template <class T>
struct is_chain : std::false_type {};
template <class... S>
struct is_chain<chain<S...>> : std::true_type {};

template <class T>
constexpr auto as_tuple(const T& t) {
  if constexpr (is_chain<T>::value) {
    return t.stages();
  } else {
    return std::tuple<T>(t);
  }
}

template <class... S>
constexpr auto make_chain(std::tuple<S...> t) {
  return chain<S...>(std::move(t));
}

template <class T>
constexpr bool ends_in_terminal() {
  if constexpr (is_chain<T>::value) {
    return T::terminal;
  } else {
    return stage_traits<T>::terminal;
  }
}

template <class L, class R>
constexpr auto join(const L& l, const R& r) {
  static_assert(!ends_in_terminal<L>(),
                "nucleus: nothing can follow a terminal stage; categorical() or argmax() must come last");
  return make_chain(std::tuple_cat(as_tuple(l), as_tuple(r)));
}

}  // namespace detail
}  // namespace nucleus
