// bf16 and f16 rows: every chain, log_softmax and top_logprobs give, bit for bit, what they give on the
// same row converted to float first (both conversions are exact; the kernels widen in registers).
#include <catch2/catch.hpp>

#include <nucleus/engine.hpp>
#include <type_traits>

#include "reference/cases.hpp"

namespace nc = nucleus;
namespace ref = nucleus_ref;

namespace {

template <class T>
void same_as_float(const nucleus_cases::test_case& c, std::span<const T> half, std::span<const float> wide,
                   nc::workspace& ws) {
  nucleus_cases::with_chain(c.chain, [&](const auto& proc, const auto& chain) {
    const auto a = chain(half, ws, c.key);
    const auto b = chain(wide, ws, c.key);
    INFO("case " << c.index << " V=" << c.row.size());
    CHECK(a.token == b.token);
    CHECK(ref::float_bits(a.logprob) == ref::float_bits(b.logprob));
    CHECK(a.status == b.status);
    if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(proc)>, nucleus_cases::no_proc>) {
      const nc::distribution dh = proc(half, ws);
      const std::vector<std::int32_t> ids(dh.ids().begin(), dh.ids().end());
      std::vector<std::uint32_t> probs;
      for (float p : dh.probs()) probs.push_back(ref::float_bits(p));
      const nc::distribution dw = proc(wide, ws);
      CHECK(ids == std::vector<std::int32_t>(dw.ids().begin(), dw.ids().end()));
      std::vector<std::uint32_t> wprobs;
      for (float p : dw.probs()) wprobs.push_back(ref::float_bits(p));
      CHECK(probs == wprobs);
      CHECK(dh.sorted() == dw.sorted());
    }
  });
  if (wide.empty()) return;
  std::vector<float> lh(wide.size()), lw(wide.size());
  CHECK(nc::log_softmax(half, std::span<float>(lh)) == nc::log_softmax(wide, std::span<float>(lw)));
  CHECK(std::memcmp(lh.data(), lw.data(), lh.size() * sizeof(float)) == 0);
  const auto th = nc::top_logprobs(half, 8, ws);
  const std::vector<nc::token_logprob> keep(th.begin(), th.end());
  const auto tw = nc::top_logprobs(wide, 8, ws);
  CHECK(keep == std::vector<nc::token_logprob>(tw.begin(), tw.end()));
}

}  // namespace

TEST_CASE("dtypes: conversions are exact", "[core][dtypes]") {
  // Every bf16 and f16 bit pattern widens to the float with the same value (NaN to a NaN).
  for (std::uint32_t b = 0; b <= 0xFFFFu; ++b) {
    const float x = nc::to_float(nc::bf16{static_cast<std::uint16_t>(b)});
    CHECK((ref::float_bits(x) >> 16) == b);
    const float h = nc::to_float(nc::f16{static_cast<std::uint16_t>(b)});
    const bool nan_bits = (b & 0x7C00u) == 0x7C00u && (b & 0x3FFu) != 0;
    if (nan_bits) {
      CHECK(std::isnan(h));
    } else {
      // f16 -> float -> f16 by the value's binary expansion: exact, so the double check below holds.
      const int e = static_cast<int>((b >> 10) & 0x1Fu);
      const double m = static_cast<double>(b & 0x3FFu);
      const double mag = e == 0    ? m * std::ldexp(1.0, -24)
                         : e == 31 ? INFINITY
                                   : (1024.0 + m) * std::ldexp(1.0, e - 25);
      CHECK(static_cast<double>(h) == ((b & 0x8000u) ? -mag : mag));
    }
  }
  CHECK(nc::to_bf16(1.0f).bits == 0x3F80u);
  CHECK(nc::to_bf16(1.00390625f).bits == 0x3F80u);  // halfway: ties to even
  CHECK(nc::to_bf16(1.01171875f).bits == 0x3F82u);  // halfway: ties to even (up)
  CHECK(std::isnan(nc::to_float(nc::to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST_CASE("dtypes: 16-bit rows match their float conversion bit for bit", "[core][dtypes]") {
  nc::workspace ws;
  std::size_t checked = 0;
  nucleus_cases::for_each_case(1500, [&](const nucleus_cases::test_case& c) {
    const std::size_t V = c.row.size();
    std::vector<nc::bf16> b(V);
    std::vector<nc::f16> h(V);
    std::vector<float> wb(V), wh(V);
    for (std::size_t i = 0; i < V; ++i) {
      b[i] = nc::to_bf16(c.row[i]);
      wb[i] = nc::to_float(b[i]);
      // f16 from the float's top bits: every 16-bit pattern (subnormals, inf, NaN) shows up.
      h[i] = nc::f16{static_cast<std::uint16_t>(ref::float_bits(c.row[i]) >> 16)};
      wh[i] = nc::to_float(h[i]);
    }
    same_as_float<nc::bf16>(c, b, wb, ws);
    same_as_float<nc::f16>(c, h, wh, ws);
    ++checked;
  });
  CHECK(checked == 1500);
}

namespace {

// A chain's distribution (or draw) on a 16-bit row and on its float widening, bit for bit.
template <class T, class Chain>
void same_bits(const Chain& chain, std::span<const T> half, std::span<const float> wide, nc::workspace& ws,
               const char* name) {
  INFO(name << " V=" << wide.size());
  if constexpr (nucleus::detail::ends_in_terminal<Chain>()) {
    for (std::uint64_t pos = 0; pos < 4; ++pos) {
      const auto a = chain(half, ws, nc::draw_key{5, pos});
      const auto b = chain(wide, ws, nc::draw_key{5, pos});
      CHECK(a.token == b.token);
      CHECK(a.status == b.status);
      CHECK(ref::float_bits(a.logprob) == ref::float_bits(b.logprob));
    }
  } else {
    const nc::distribution dh = chain(half, ws, nc::draw_key{5, 1});
    const std::vector<std::int32_t> ids(dh.ids().begin(), dh.ids().end());
    std::vector<std::uint32_t> probs;
    for (float p : dh.probs()) probs.push_back(ref::float_bits(p));
    const nc::distribution dw = chain(wide, ws, nc::draw_key{5, 1});
    CHECK(ids == std::vector<std::int32_t>(dw.ids().begin(), dw.ids().end()));
    std::vector<std::uint32_t> wprobs;
    for (float p : dw.probs()) wprobs.push_back(ref::float_bits(p));
    CHECK(probs == wprobs);
  }
}

}  // namespace

TEST_CASE("dtypes: the samplers beyond top-k / top-p / min-p read 16-bit rows bit for bit as float",
          "[core][dtypes]") {
  nc::workspace ws;
  nucleus_cases::for_each_sweep_row(0x16B, [&](const nucleus_cases::sweep_row& r) {
    const std::size_t V = r.V;
    std::vector<nc::bf16> b(V);
    std::vector<nc::f16> h(V);
    std::vector<float> wb(V), wh(V);
    for (std::size_t i = 0; i < V; ++i) {
      b[i] = nc::to_bf16(r.row[i]);
      wb[i] = nc::to_float(b[i]);
      h[i] = nc::f16{static_cast<std::uint16_t>(ref::float_bits(r.row[i]) >> 16)};
      wh[i] = nc::to_float(h[i]);
    }
    auto both = [&](const auto& chain, const char* name) {
      same_bits<nc::bf16>(chain, b, wb, ws, name);
      same_bits<nc::f16>(chain, h, wh, ws, name);
    };
    both(nc::temperature(0.7f) | nc::typical(0.9f), "typical");
    both(nc::top_n_sigma(1.0f) | nc::temperature(1.3f), "top_n_sigma");
    both(nc::xtc(1.0f, 0.05f) | nc::top_k(0), "xtc");
    both(nc::epsilon_cutoff(3e-4f) | nc::eta_cutoff(1e-3f), "epsilon | eta");
    both(nc::dynamic_temperature(0.8f, 0.5f, 1.0f) | nc::categorical(), "dynamic_temperature");
    float mu1 = 8.0f, mu2 = 8.0f;
    both(nc::mirostat_v2(5.0f, 0.0f, mu2), "mirostat_v2");  // eta 0: mu stays, so both runs see one mu
    both(nc::mirostat(5.0f, 0.0f, mu1), "mirostat");
  });
}
