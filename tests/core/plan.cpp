// The plan a chain derives from its stages' stage_info at compile time, what it hands to the stages
// that read it, and the run-time check that a stage keeps the contract the plan rests on.
#include <catch2/catch.hpp>

#include <cstdint>
#include <stdexcept>
#include <vector>

#include <nucleus/nucleus.hpp>

namespace nc = nucleus;

namespace {

// Records the plan it was given (a stage that reads the plan), and whether it ran at all.
struct probe_stage : nc::stage<probe_stage> {
  static constexpr nc::stage_info info{};
  struct seen {
    bool ran = false;
    nc::row_plan plan{};
  };
  seen* out;
  template <nc::row_plan P>
  void apply(nc::row_state&, nc::plan<P>) const {
    out->ran = true;
    out->plan = P;
  }
};

// Stages that break the contract: they do what they do not declare.
struct sorts_undeclared_stage : nc::stage<sorts_undeclared_stage> {
  static constexpr nc::stage_info info{};
  void apply(nc::row_state& s) const {
    s.ws().vals.data()[0] = 1.0f;
    s.ws().ids.data()[0] = 0;
    s.assign(1, /*sorted=*/true);
  }
};
struct sorts_declared : sorts_undeclared_stage {
  static constexpr nc::stage_info info{.sorts = true};
};
struct tempers_undeclared_stage : nc::stage<tempers_undeclared_stage> {
  static constexpr nc::stage_info info{};
  void apply(nc::row_state& s) const { s.scale_inv_temperature(2.0f); }
};

}  // namespace

TEST_CASE("plan: what may hold before each stage follows from the stages before it", "[core][plan]") {
  using C =
      decltype(nc::top_p(0.9f) | nc::temperature(0.7f) | nc::top_k(40) | nc::min_p(0.1f) | nc::categorical());
  static_assert(C::plan_before<0>() == nc::row_plan{false, false});
  static_assert(C::plan_before<1>() == nc::row_plan{false, false});  // top_p neither sorts nor tempers
  static_assert(C::plan_before<2>() == nc::row_plan{false, true});   // after temperature
  static_assert(C::plan_before<3>() == nc::row_plan{true, true});    // after top_k
  static_assert(C::plan_before<4>() == nc::row_plan{true, true});
  // A row prepared elsewhere enters with nothing ruled out.
  static_assert(C::plan_before<0, nc::row_plan{}>() == nc::row_plan{true, true});
  using D = decltype(nc::dynamic_temperature(1.0f, 0.5f, 1.0f) | nc::xtc(0.5f, 0.1f) | nc::argmax());
  static_assert(D::plan_before<1>() == nc::row_plan{false, true});  // dynamic temperature tempers
  static_assert(D::plan_before<2>() == nc::row_plan{false, true});
}

TEST_CASE("plan: stages that read the plan receive it, and greedy rows skip the rest", "[core][plan]") {
  std::vector<float> row(50);
  for (std::size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>(i % 7);
  nc::workspace ws;
  probe_stage::seen a, b, c;
  const auto chain = probe_stage{{}, &a} | nc::temperature(0.5f) | probe_stage{{}, &b} | nc::top_k(5) |
                     probe_stage{{}, &c} | nc::categorical();
  REQUIRE(chain(row, ws, nc::draw_key{1, 2}).status == nc::status::ok);
  CHECK((a.ran && b.ran && c.ran));
  CHECK(a.plan == nc::row_plan{false, false});
  CHECK(b.plan == nc::row_plan{false, true});
  CHECK(c.plan == nc::row_plan{true, true});

  // The same chain on a row_state the caller prepared: every stage gets the default plan.
  probe_stage::seen d;
  const auto proc = probe_stage{{}, &d} | nc::top_p(0.9f);
  nc::row_state s(std::span<const float>(row), ws);
  proc.apply(s);
  CHECK(d.ran);
  CHECK(d.plan == nc::row_plan{});

  // T = 0 makes the row greedy: stages after it have nothing to cut and do not run.
  probe_stage::seen e;
  const auto greedy = nc::temperature(0.0f) | probe_stage{{}, &e} | nc::categorical();
  const auto r = greedy(row, ws, nc::draw_key{1, 2});
  CHECK(r.token == 6);
  CHECK_FALSE(e.ran);
}

TEST_CASE("plan: a stage that breaks its stage_info is an error, not a wrong distribution", "[core][plan]") {
  std::vector<float> row(20, 0.0f);
  nc::workspace ws;
  // Were these allowed, a later top_p would skip its sorted walk and argmax its rank-order shortcut
  // on a plan that says the row cannot be sorted or greedy.
  CHECK_THROWS_AS((sorts_undeclared_stage{} | nc::top_p(0.5f))(row, ws), std::logic_error);
  CHECK_THROWS_AS((tempers_undeclared_stage{} | nc::argmax())(row, ws), std::logic_error);
  // Declared, the same work is fine.
  CHECK_NOTHROW((sorts_declared{} | nc::top_p(0.5f))(row, ws));
}
