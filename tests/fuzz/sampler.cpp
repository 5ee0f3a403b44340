// libFuzzer harness: rows of float, bf16 or f16 logits (NaN, ±inf, denormals, huge values, ties)
// through core chains, the ops and the engine sampler, under the ISA an input byte picks.
//
// Input: isa, dtype, mode (core chain or engine order), a 2-byte row length V, V value tags, then the
// parameters (every stage, mirostat with its caller-owned mu, and every engine field). Past the end every
// read gives zeros. Checked: a status-ok token is in [0, V), is a candidate (never NaN or -inf) and respects
// the request's bitmask, bans and allowed list; no logprob is NaN or positive; every probability the library
// returns is finite and they sum to 1 within 1e-5; results are bit-identical under the scalar target and
// under repetition.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <vector>

#include <nucleus/engine.hpp>
#include <nucleus/nucleus.hpp>
#include <nucleus/simd/isa.hpp>

#include "fuzz_input.hpp"

namespace {

namespace nc = nucleus;
using nucleus_fuzz::check;
using nucleus_fuzz::input;

constexpr std::size_t max_vocab = 2048;

float from_bits(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}
std::uint32_t to_bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

const float specials[16] = {0.0f,
                            std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::min(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            -0.0f,
                            1e30f,
                            -1e30f,
                            88.72f,
                            -103.97f,
                            from_bits(0xffc00001u),  // a negative NaN with a payload
                            1.0f};

// A logit: a special value, a small multiple of 1/4 (ties are common), or raw bits.
float logit(input& in) {
  const std::uint8_t t = in.byte();
  if (t < 32) return specials[t % 16];
  if (t < 224) return static_cast<float>(static_cast<int>(t) - 128) / 4.0f;
  return from_bits(in.u32());
}

// A parameter: a special value, a fraction in [0, 1.6), or raw bits.
float param(input& in) {
  const std::uint8_t t = in.byte();
  if (t < 16) return specials[t];
  if (t < 224) return static_cast<float>(t - 16) / 128.0f;
  return from_bits(in.u32());
}

// Truncating float -> binary16 bits: only test data, any fixed mapping does.
std::uint16_t half_bits(float f) {
  const std::uint32_t x = to_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const int biased = static_cast<int>((x >> 23) & 0xffu);
  std::uint32_t m = x & 0x7fffffu;
  if (biased == 0xff) return sign | 0x7c00u | (m != 0 ? 0x200u : 0u);
  const int e = biased - 127 + 15;
  if (e >= 31) return sign | 0x7c00u;
  if (e <= 0) {
    if (e < -10) return sign;
    m |= 0x800000u;
    return static_cast<std::uint16_t>(sign | (m >> (14 - e)));
  }
  return static_cast<std::uint16_t>(sign | (e << 10) | (m >> 13));
}

bool is_candidate(float x) {
  return !std::isnan(x) && x != -std::numeric_limits<float>::infinity();
}

void check_logprob(float lp) {
  check(!std::isnan(lp));
  check(lp <= 1e-4f);
}

void check_distribution(const nc::distribution& d, std::size_t v, std::span<const float> row) {
  if (d.status() != nc::status::ok) {
    check(d.empty());
    return;
  }
  check(!d.empty());
  double sum = 0.0;
  for (std::size_t i = 0; i < d.size(); ++i) {
    const std::int32_t id = d.ids()[i];
    const float p = d.probs()[i];
    check(id >= 0 && static_cast<std::size_t>(id) < v);
    if (!row.empty()) check(is_candidate(row[id]));
    check(std::isfinite(p) && p >= 0.0f);
    if (i > 0 && d.sorted()) check(p <= d.probs()[i - 1]);
    if (i > 0 && !d.sorted()) check(id > d.ids()[i - 1]);
    sum += p;
  }
  check(std::fabs(sum - 1.0) <= 1e-5);
}

bool same_distribution(const nc::distribution& a, const nc::distribution& b) {
  if (a.status() != b.status() || a.size() != b.size() || a.sorted() != b.sorted()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a.ids()[i] != b.ids()[i] || to_bits(a.probs()[i]) != to_bits(b.probs()[i])) return false;
  }
  return true;
}

bool same_result(const nc::sample_result& a, const nc::sample_result& b) {
  return a.status == b.status && a.token == b.token && to_bits(a.logprob) == to_bits(b.logprob);
}

// Runs f under the chosen target, then under scalar, and checks that both agree bit for bit.
template <class F, class Same>
void across_targets(nc::isa chosen, F&& f, Same&& same) {
  nc::set_isa(chosen);
  const auto a = f();
  nc::set_isa(nc::isa::scalar);
  const auto b = f();
  nc::set_isa(chosen);
  check(same(a, b));
}

struct row_set {
  std::vector<float> f32;  // what the stages see, widened
  std::vector<nc::bf16> b16;
  std::vector<nc::f16> h16;
};

template <class T>
void core_chain(input& in, std::span<const T> row, std::span<const float> wide, nc::isa chosen) {
  nc::workspace ws;  // fresh per run here; the engine path reuses one
  const std::size_t v = row.size();
  const std::uint8_t shape = in.byte();
  const float t = param(in) * 2.0f, p = param(in), m = param(in);
  const int k = static_cast<std::int8_t>(in.byte());
  const nc::ties tie = in.flag() ? nc::ties::keep : nc::ties::exact;
  const nc::draw_key key{in.u32(), in.u32()};

  auto draw = [&](const auto& chain) {
    const auto run = [&] { return chain(row, ws, key); };
    const nc::sample_result r = run();
    if (r.status == nc::status::ok) {
      check(r.token >= 0 && static_cast<std::size_t>(r.token) < v);
      check(is_candidate(wide[r.token]));
      check_logprob(r.logprob);
    } else {
      check(r.token == -1);
    }
    across_targets(chosen, run, same_result);
  };
  auto greedy = [&](const auto& chain) {
    const auto run = [&] { return chain(row, ws); };
    const nc::sample_result r = run();
    if (r.status == nc::status::ok) {
      check(r.token >= 0 && static_cast<std::size_t>(r.token) < v);
      check(is_candidate(wide[r.token]));
    }
    across_targets(chosen, run, same_result);
  };
  auto process = [&](const auto& chain) {
    check_distribution(chain(row, ws), v, wide);
    // Copy out: a distribution is a view into ws, which the second run overwrites.
    struct copy {
      nc::status s;
      bool sorted;
      std::vector<std::int32_t> ids;
      std::vector<float> probs;
    };
    const auto run = [&] {
      const nc::distribution d = chain(row, ws);
      return copy{
          d.status(), d.sorted(), {d.ids().begin(), d.ids().end()}, {d.probs().begin(), d.probs().end()}};
    };
    across_targets(chosen, run, [](const copy& a, const copy& b) {
      return same_distribution({a.ids.data(), a.probs.data(), a.ids.size(), a.sorted, a.s},
                               {b.ids.data(), b.probs.data(), b.ids.size(), b.sorted, b.s});
    });
  };

  try {
    switch (shape % 24) {
      case 0:
        return greedy(nc::argmax());
      case 1:
        return draw(nc::categorical());
      case 2:
        return draw(nc::temperature(t) | nc::categorical());
      case 3:
        return draw(nc::top_k(k, tie) | nc::categorical());
      case 4:
        return draw(nc::top_p(p) | nc::categorical());
      case 5:
        return draw(nc::min_p(m) | nc::categorical());
      case 6:
        return draw(nc::temperature(t) | nc::top_k(k, tie) | nc::top_p(p) | nc::min_p(m) | nc::categorical());
      case 7:
        return draw(nc::temperature(t) | nc::min_p(m) | nc::top_k(k, tie) | nc::top_p(p) | nc::categorical());
      case 8:
        return draw(nc::top_k(k, tie) | nc::top_p(p) | nc::min_p(m) | nc::temperature(t) | nc::categorical());
      case 9:
        return greedy(nc::temperature(t) | nc::top_k(k, tie) | nc::argmax());
      case 10:
        return process(nc::top_k(k, tie) | nc::top_p(p));
      case 11:
        return process(nc::temperature(t) | nc::min_p(m) | nc::top_k(k, tie));
      case 12:
        return process(nc::temperature(t) | nc::top_p(p) | nc::min_p(m));
      case 14:
        return draw(nc::typical(p) | nc::categorical());
      case 15:
        return draw(nc::top_n_sigma(t - 1.0f) | nc::categorical());
      case 16:
        return draw(nc::xtc(p, m) | nc::categorical());
      case 17:
        return draw(nc::epsilon_cutoff(m) | nc::categorical());
      case 18:
        return draw(nc::eta_cutoff(m) | nc::categorical());
      case 19:
        return draw(nc::dynamic_temperature(t, p - 0.5f, m * 4.0f) | nc::categorical());
      case 20:
      case 21: {
        // mu is request state: each run starts from the same value, so the targets can be compared.
        const float mu0 = t * 10.0f;
        float mu = mu0;
        const bool v1 = shape % 24 == 20;
        const auto run = [&] {
          mu = mu0;
          return v1 ? nc::mirostat(p * 10.0f, m, mu, 1 + k % 128)(row, ws, key)
                    : nc::mirostat_v2(p * 10.0f, m, mu)(row, ws, key);
        };
        const nc::sample_result r = run();
        if (r.status == nc::status::ok) {
          check(r.token >= 0 && static_cast<std::size_t>(r.token) < v);
          check(is_candidate(wide[r.token]));
          check_logprob(r.logprob);
          if (std::isfinite(mu0)) check(!std::isnan(mu));  // a NaN mu from the caller stays NaN
        }
        across_targets(chosen, run, same_result);
        return;
      }
      case 22:
        return process(nc::top_n_sigma(t) | nc::typical(p) | nc::eta_cutoff(m) |
                       nc::epsilon_cutoff(m * 0.01f));
      case 23:
        return draw(nc::top_n_sigma(t) | nc::top_k(k, tie) | nc::typical(p) | nc::top_p(p) | nc::min_p(m) |
                    nc::xtc(m, p * 0.5f) | nc::dynamic_temperature(t, m, p) | nc::categorical());
      case 13: {
        std::vector<float> out(v);
        const nc::status s = nc::log_softmax(row, std::span<float>(out));
        double sum = 0.0;
        for (std::size_t i = 0; i < v; ++i) {
          check_logprob(out[i]);
          if (!is_candidate(wide[i])) check(out[i] == -std::numeric_limits<float>::infinity());
          sum += std::exp(static_cast<double>(out[i]));
        }
        if (s == nc::status::ok) check(std::fabs(sum - 1.0) <= 1e-5);
        const std::size_t n = static_cast<std::size_t>(k < 0 ? -k : k);
        const auto top = nc::top_logprobs(row, n, ws);
        check(top.size() <= n);
        for (std::size_t i = 0; i < top.size(); ++i) {
          check(top[i].token >= 0 && static_cast<std::size_t>(top[i].token) < v);
          check(is_candidate(wide[top[i].token]));
          check_logprob(top[i].logprob);
          if (i > 0) check(top[i].logprob <= top[i - 1].logprob);
        }
        return;
      }
    }
  } catch (const std::invalid_argument&) {
    // a bad stage parameter: refused at construction
  }
}

std::vector<std::int32_t> ids(input& in, std::size_t max) {
  std::vector<std::int32_t> out(in.byte() % (max + 1));
  for (std::int32_t& id : out) id = static_cast<std::int32_t>(in.byte()) - 4;  // mostly in range
  return out;
}

template <class T>
void engine(input& in, std::span<const T> row, std::span<const float> wide, nc::isa chosen) {
  const std::size_t v = row.size();
  nc::sampling_params sp;
  const auto order = static_cast<nc::engine_order>(in.byte() % 4);
  sp.temperature = param(in) * 2.0f;
  sp.top_k = static_cast<std::int8_t>(in.byte());
  sp.top_p = param(in);
  sp.min_p = param(in);
  sp.repetition_penalty = param(in) * 2.0f;
  sp.presence_penalty = logit(in);
  sp.frequency_penalty = logit(in);
  sp.penalty_last_n = static_cast<std::int8_t>(in.byte());
  for (std::size_t n = in.byte() % 8; n > 0; --n)
    sp.logit_bias.push_back({static_cast<std::int32_t>(in.byte()) - 4, logit(in)});
  sp.allowed_token_ids = ids(in, 8);
  sp.banned_token_ids = ids(in, 8);
  sp.min_tokens = in.byte() % 8;
  sp.eos_token_ids = ids(in, 3);
  sp.seed = in.u32();
  sp.logprobs = static_cast<int>(in.byte() % 72) - 2;
  sp.logprobs_mode = in.flag() ? nc::logprob_mode::processed : nc::logprob_mode::raw;
  const std::vector<std::int32_t> prompt = ids(in, 16), output = ids(in, 16);
  if (in.byte() & 1) {  // the samplers only some engines have (a zero byte leaves them off)
    sp.typical_p = param(in);
    sp.top_n_sigma = param(in) * 4.0f - 1.0f;
    sp.xtc_probability = param(in);
    sp.xtc_threshold = param(in);
    sp.epsilon_cutoff = param(in) * 0.1f;
    sp.eta_cutoff = param(in) * 0.1f;
    sp.dynatemp_range = param(in) - 0.5f;
    sp.dynatemp_exponent = param(in) * 2.0f;
    sp.mirostat = in.byte() % 3;
    sp.mirostat_tau = param(in) * 8.0f;
    sp.mirostat_eta = param(in);
    sp.dry_multiplier = param(in);
    sp.dry_base = 1.0f + param(in);
    sp.dry_allowed_length = in.byte() % 5;
    sp.dry_penalty_last_n = static_cast<std::int8_t>(in.byte());
    for (std::size_t n = in.byte() % 4; n > 0; --n) sp.dry_sequence_breakers.push_back(ids(in, 3));
    sp.no_repeat_ngram_size = in.byte() % 5;
  }
  std::vector<std::uint32_t> bitmask;
  if (const std::uint8_t b = in.byte(); b & 1) {
    const std::size_t words = (b & 2) ? (v + 31) / 32 : in.byte() % 72;
    const std::uint32_t pattern = in.u32();
    for (std::size_t i = 0; i < words; ++i) bitmask.push_back(i % 3 == 0 ? pattern : ~pattern >> (i % 32));
  }
  std::optional<nc::sampler> made;
  try {
    made.emplace(sp, order);
  } catch (const std::invalid_argument&) {
    return;  // a bad parameter: refused when the sampler is built
  }
  const nc::sampler& s = *made;
  const float mu0 = nc::mirostat_initial_mu(sp.mirostat_tau);
  float mu = mu0;
  const nc::row_request rq{.prompt = prompt, .output = output, .bitmask = bitmask, .mirostat_mu = &mu};
  static nc::workspace ws;  // reused across runs, as an engine reuses a slot's workspace
  std::vector<nc::token_logprob> top(s.top_n());

  const auto run = [&] {
    mu = mu0;  // request state: every run starts from the same mu
    return s.sample(row, ws, rq, top);
  };
  const nc::row_result r = run();
  if (r.status == nc::status::ok) {
    check(r.token >= 0 && static_cast<std::size_t>(r.token) < v);
    check(is_candidate(wide[r.token]));  // processors never revive a NaN or -inf logit
    check_logprob(r.logprob);
    if (!bitmask.empty()) check((bitmask[r.token / 32] >> (r.token % 32)) & 1u);
    for (std::int32_t b : sp.banned_token_ids) check(r.token != b);
    if (!sp.allowed_token_ids.empty()) {
      bool allowed = false;
      for (std::int32_t a : sp.allowed_token_ids) allowed = allowed || a == r.token;
      check(allowed);
    }
    if (output.size() < static_cast<std::size_t>(sp.min_tokens))
      for (std::int32_t e : sp.eos_token_ids) check(r.token != e);
    check(r.top_count <= top.size());
    for (std::size_t i = 0; i < r.top_count; ++i) {
      check(top[i].token >= 0 && static_cast<std::size_t>(top[i].token) < v);
      check_logprob(top[i].logprob);
    }
  } else {
    check(r.token == -1);
  }
  std::vector<nc::token_logprob> first(top.begin(), top.begin() + r.top_count);
  across_targets(chosen, run, [](const nc::row_result& a, const nc::row_result& b) {
    return a.status == b.status && a.token == b.token && a.rank == b.rank && a.top_count == b.top_count &&
           to_bits(a.logprob) == to_bits(b.logprob);
  });
  for (std::size_t i = 0; i < r.top_count; ++i)
    check(top[i].token == first[i].token && to_bits(top[i].logprob) == to_bits(first[i].logprob));

  mu = mu0;
  check_distribution(s.process(row, ws, rq), v, {});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in(data, size);
  static const nc::isa initial = nc::active_isa();
  nc::isa chosen = nc::all_isas[in.byte() % std::size(nc::all_isas)];  // (one this CPU lacks: the initial)
  if (!nc::set_isa(chosen)) chosen = initial;
  nc::set_isa(chosen);
  const std::uint8_t dtype = in.byte() % 3;
  const std::uint8_t mode = in.byte();

  const std::size_t v = in.u16() % (max_vocab + 1);
  row_set rows;
  for (std::size_t i = 0; i < v; ++i) rows.f32.push_back(logit(in));
  // bf16 and f16 rows hold their own bits; the f32 row is what they widen to, for the checks.
  if (dtype == 1) {
    for (float& x : rows.f32) {
      rows.b16.push_back(nc::bf16{static_cast<std::uint16_t>(to_bits(x) >> 16)});
      x = from_bits(static_cast<std::uint32_t>(rows.b16.back().bits) << 16);
    }
  } else if (dtype == 2) {
    for (float& x : rows.f32) {
      rows.h16.push_back(nc::f16{half_bits(x)});
      x = nc::detail::half_bits_to_float(rows.h16.back().bits);
    }
  }
  const std::span<const float> wide = rows.f32;
  auto go = [&](auto row) {
    if (mode & 1)
      engine(in, row, wide, chosen);
    else
      core_chain(in, row, wide, chosen);
  };
  if (dtype == 0) go(std::span<const float>(rows.f32));
  if (dtype == 1) go(std::span<const nc::bf16>(rows.b16));
  if (dtype == 2) go(std::span<const nc::f16>(rows.h16));
  return 0;
}
