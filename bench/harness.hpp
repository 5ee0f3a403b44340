// Benchmark your own kernel for a stage against nucleus's, in the same binary, on the same rows.
//
//   nucleus::bench::register_top_k_kernel("partial_sort",
//       [](std::span<const float> logits, int k, std::span<std::int32_t> out_ids) { ... });
//   nucleus::bench::register_argmax_kernel("scalar", [](std::span<const float> logits) { ... });
//
// Contracts (the rows are finite or -inf, never NaN; k <= the number of finite logits):
//   top-k:  out_ids (size k) receives the k best ids ordered by (logit descending, id ascending).
//   argmax: returns the id of the largest logit, ties to the lowest id.
//
// Registration only queues a kernel (so it may run during static initialization). run() then checks
// each against a plain scalar double-precision reference on random, peaky, tied and masked rows; a
// kernel that fails is reported and never benchmarked, and `--nucleus_strict` makes run() return 1
// before timing anything. A kernel that passes gets BM_custom_<stage>/<name>/<V> right after
// BM_ours_<stage>/<target>/<V> (one per --nucleus_isa target), all reporting `passes` against the
// same BM_onepass.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common.hpp"

namespace nucleus::bench {

using top_k_kernel =
    std::function<void(std::span<const float> logits, int k, std::span<std::int32_t> out_ids)>;
using argmax_kernel = std::function<std::int32_t(std::span<const float> logits)>;

// The k every top-k benchmark uses (the top_k of the common chains).
inline constexpr int bench_top_k = 40;

struct check_result {
  bool ok = true;
  std::string message;  // the first mismatch, when !ok
};

namespace detail {

struct check_row {
  std::string name;
  std::vector<float> logits;
};

inline std::vector<check_row> make_check_rows() {
  std::vector<check_row> rows;
  std::mt19937_64 rng(0x636865636Bull);
  auto normal_row = [&](std::size_t n, float sd) {
    std::normal_distribution<float> d(0.0f, sd);
    std::vector<float> x(n);
    for (float& v : x) v = d(rng);
    return x;
  };
  rows.push_back({"random", normal_row(1000, 1.0f)});
  rows.push_back({"random_odd_tail", normal_row(4099, 3.0f)});
  rows.push_back({"short", normal_row(17, 1.0f)});
  {
    aligned_floats p = make_peaky_logits(32000, 7);
    rows.push_back({"peaky", {p.begin(), p.end()}});
  }
  {
    const auto big = static_cast<std::size_t>(vocab_sizes.back());
    aligned_floats p = make_peaky_logits(big, 0x6E75636C65757300ull + big);  // the benchmark's own row
    rows.push_back({"peaky_bench_row", {p.begin(), p.end()}});
  }
  {
    // Few distinct values: the k-th best is tied with many others, so the id order decides.
    std::vector<float> x = normal_row(5000, 1.0f);
    for (float& v : x) v = std::round(v * 2.0f) / 2.0f + 0.0f;  // + 0.0f: no -0.0 (it ties +0.0)
    rows.push_back({"tied", std::move(x)});
  }
  {
    std::vector<float> x(300, 1.5f);
    x[299] = 2.0f;
    rows.push_back({"all_tied_but_last", std::move(x)});
  }
  {
    std::vector<float> x = normal_row(2000, 1.0f);
    std::uniform_int_distribution<int> coin(0, 9);
    for (float& v : x)
      if (coin(rng) != 0) v = -std::numeric_limits<float>::infinity();  // masked (e.g. a grammar)
    x[1999] = -std::numeric_limits<float>::infinity();
    rows.push_back({"masked", std::move(x)});
  }
  {
    std::vector<float> x = normal_row(3000, 1.0f);
    for (float& v : x) v = -100.0f - std::abs(v);
    x[0] = x[2999] = -100.0f;  // the best at both ends
    rows.push_back({"negative_ends", std::move(x)});
  }
  return rows;
}

inline const std::vector<check_row>& check_rows() {
  static const std::vector<check_row> rows = make_check_rows();
  return rows;
}

inline bool candidate(float x) noexcept {
  return !std::isnan(x) && x != -std::numeric_limits<float>::infinity();
}

// The references: plain loops over doubles, nothing shared with any kernel.
inline std::vector<std::int32_t> reference_top_k(std::span<const float> x, std::size_t k) {
  std::vector<std::int32_t> ids;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (candidate(x[i])) ids.push_back(static_cast<std::int32_t>(i));
  auto better = [&](std::int32_t a, std::int32_t b) {
    const double xa = x[static_cast<std::size_t>(a)], xb = x[static_cast<std::size_t>(b)];
    return xa > xb || (xa == xb && a < b);
  };
  k = std::min(k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), better);
  ids.resize(k);
  return ids;
}

inline std::int32_t reference_argmax(std::span<const float> x) {
  double best = -std::numeric_limits<double>::infinity();
  std::int32_t id = -1;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    if (v > best) {  // strictly: the first of equal maxima stays
      best = v;
      id = static_cast<std::int32_t>(i);
    }
  }
  return id;
}

inline std::size_t candidates(std::span<const float> x) {
  return static_cast<std::size_t>(std::count_if(x.begin(), x.end(), candidate));
}

inline std::string describe(std::span<const float> x, std::int32_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= x.size()) return std::to_string(id) + " (out of range)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%d (logit %.9g)", id, static_cast<double>(x[static_cast<std::size_t>(id)]));
  return buf;
}

}  // namespace detail

// Checks a top-k kernel for k in {1, 8, bench_k, all candidates} (capped by each row's candidates).
inline check_result check_top_k_kernel(const top_k_kernel& kernel, int bench_k = bench_top_k) {
  for (const detail::check_row& row : detail::check_rows()) {
    const std::span<const float> x(row.logits);
    const std::size_t n = detail::candidates(x);
    std::vector<std::size_t> ks{1, 8, static_cast<std::size_t>(bench_k)};
    if (n <= 300) ks.push_back(n);
    for (std::size_t k : ks) {
      k = std::min(k, n);
      if (k == 0) continue;
      const std::vector<std::int32_t> want = detail::reference_top_k(x, k);
      std::vector<std::int32_t> got(k, -1);
      try {
        kernel(x, static_cast<int>(k), got);
      } catch (const std::exception& e) {
        return {false, "row '" + row.name + "' k=" + std::to_string(k) + ": threw " + e.what()};
      }
      for (std::size_t i = 0; i < k; ++i) {
        if (got[i] == want[i]) continue;
        return {false, "row '" + row.name + "' (V=" + std::to_string(x.size()) + ") k=" + std::to_string(k) +
                           ": rank " + std::to_string(i) + " is " + detail::describe(x, got[i]) +
                           ", expected " + detail::describe(x, want[i])};
      }
    }
  }
  return {};
}

inline check_result check_argmax_kernel(const argmax_kernel& kernel) {
  for (const detail::check_row& row : detail::check_rows()) {
    const std::span<const float> x(row.logits);
    const std::int32_t want = detail::reference_argmax(x);
    std::int32_t got = -1;
    try {
      got = kernel(x);
    } catch (const std::exception& e) {
      return {false, "row '" + row.name + "': threw " + e.what()};
    }
    if (got != want)
      return {false, "row '" + row.name + "' (V=" + std::to_string(x.size()) + "): got " +
                         detail::describe(x, got) + ", expected " + detail::describe(x, want)};
  }
  return {};
}

namespace detail {

inline std::vector<nucleus::isa>& targets() {
  static std::vector<nucleus::isa> t;
  return t;
}

// The targets this build compiles (x86-64: scalar, sse2, avx2, avx512; aarch64: scalar, neon),
// scalar first: what "all" means and what the help lists.
inline std::vector<nucleus::isa> built_targets() {
  std::vector<nucleus::isa> built;
  for (auto t = std::rbegin(nucleus::all_isas); t != std::rend(nucleus::all_isas); ++t)
    if (nucleus::detail::compiled(*t)) built.push_back(*t);
  return built;
}

inline std::string built_target_names() {
  std::string names;
  for (nucleus::isa t : built_targets())
    names += std::string(names.empty() ? "" : ", ") + nucleus::isa_name(t);
  return names;
}

// --nucleus_isa's value: "all" (every target this build compiles) or a comma list of target names.
// Targets the CPU or build lacks are skipped with a message; an unknown name, or no target left, is
// an error (returns false).
inline bool parse_targets(std::string_view list) {
  std::vector<nucleus::isa> wanted;
  if (list == "all") {
    wanted = built_targets();
  } else {
    while (!list.empty()) {
      const std::size_t comma = list.find(',');
      const std::string_view name = list.substr(0, comma);
      const std::optional<nucleus::isa> t = nucleus::parse_isa(name);
      if (!t) {
        std::fprintf(stderr, "nucleus bench: --nucleus_isa: unknown target '%.*s' (this build: %s, all)\n",
                     static_cast<int>(name.size()), name.data(), built_target_names().c_str());
        return false;
      }
      wanted.push_back(*t);
      list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    }
  }
  targets().clear();
  for (nucleus::isa t : wanted) {
    if (std::find(targets().begin(), targets().end(), t) != targets().end()) continue;
    if (nucleus::isa_supported(t)) {
      targets().push_back(t);
    } else {
      std::fprintf(stderr, "nucleus bench: target %s is not supported by this CPU or build; skipped\n",
                   nucleus::isa_name(t));
    }
  }
  if (targets().empty()) std::fprintf(stderr, "nucleus bench: --nucleus_isa: no supported target left\n");
  return !targets().empty();
}

}  // namespace detail

// The targets this run measures each nucleus benchmark under (--nucleus_isa; default the active one).
inline const std::vector<nucleus::isa>& bench_targets() {
  if (detail::targets().empty()) detail::targets().push_back(nucleus::active_isa());
  return detail::targets();
}

// Registers `fn` once per target as <name>/<target>, which runs on that target (set_isa before its
// loop), each with `vocabs` as its argument.
template <class Fn>
void register_per_target(const std::string& name, Fn fn, std::span<const std::int64_t> vocabs = vocab_sizes) {
  for (nucleus::isa t : bench_targets()) {
    const std::string full = name + "/" + nucleus::isa_name(t);
    auto* b = benchmark::RegisterBenchmark(full.c_str(), [=](benchmark::State& s) {
                if (!nucleus::set_isa(t)) {
                  s.SkipWithError("target not supported");
                  return;
                }
                fn(s);
              })->Unit(benchmark::kMicrosecond);
    for (std::int64_t v : vocabs) b->Arg(v);
  }
}

namespace detail {

struct custom_kernels {
  std::vector<std::pair<std::string, top_k_kernel>> top_k;
  std::vector<std::pair<std::string, argmax_kernel>> argmax;
};

inline custom_kernels& queued() {
  static custom_kernels k;
  return k;
}

inline void BM_ours_top_k(benchmark::State& state, int k) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x = peaky_logits(vocab);
  nucleus::workspace& ws = shared_workspace();
  const auto stage = nucleus::top_k(k);
  run_with_passes(state, vocab, [&] {
    nucleus::distribution d = stage(x, ws);
    benchmark::DoNotOptimize(d);
  });
}

inline void BM_custom_top_k(benchmark::State& state, const top_k_kernel& kernel, int k) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x = peaky_logits(vocab);
  std::vector<std::int32_t> out(static_cast<std::size_t>(k));
  run_with_passes(state, vocab, [&] {
    kernel(x, k, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  });
}

inline void BM_ours_argmax(benchmark::State& state) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x = peaky_logits(vocab);
  nucleus::workspace& ws = shared_workspace();
  const auto greedy = nucleus::argmax();
  run_with_passes(state, vocab, [&] {
    nucleus::sample_result r = greedy(x, ws);
    benchmark::DoNotOptimize(r);
  });
}

inline void BM_custom_argmax(benchmark::State& state, const argmax_kernel& kernel) {
  const auto vocab = static_cast<std::size_t>(state.range(0));
  const std::span<const float> x = peaky_logits(vocab);
  run_with_passes(state, vocab, [&] {
    std::int32_t id = kernel(x);
    benchmark::DoNotOptimize(id);
  });
}

inline bool valid_name(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.';
  });
}

// Ours through the custom-kernel contract, so the same check shows both sides select the same ids.
inline void ours_top_k_kernel(std::span<const float> x, int k, std::span<std::int32_t> out) {
  static nucleus::workspace ws;
  const nucleus::distribution d = nucleus::top_k(k)(x, ws);
  std::vector<std::int32_t> ids(d.ids().begin(), d.ids().end());
  std::sort(ids.begin(), ids.end(), [&](std::int32_t a, std::int32_t b) {
    const float xa = x[static_cast<std::size_t>(a)], xb = x[static_cast<std::size_t>(b)];
    return xa > xb || (xa == xb && a < b);
  });
  std::copy_n(ids.begin(), std::min(ids.size(), out.size()), out.begin());
}

inline std::int32_t ours_argmax_kernel(std::span<const float> x) {
  static nucleus::workspace ws;
  return nucleus::argmax()(x, ws).token;
}

// Checks every queued kernel of one stage; registers ours and the kernels that pass, V by V.
template <class Kernel, class Check, class Ours, class Custom>
int check_and_register(const char* stage, std::vector<std::pair<std::string, Kernel>>& kernels, Check check,
                       const std::type_identity_t<Kernel>& ours_kernel, Ours ours, Custom custom) {
  int rejected = 0;
  std::vector<const std::pair<std::string, Kernel>*> passed;
  std::vector<std::string> seen;
  for (const auto& entry : kernels) {
    const std::string& name = entry.first;
    check_result r;
    if (!valid_name(name)) {
      r = {false, "the name must be non-empty and use only [A-Za-z0-9_.-]"};
    } else if (std::find(seen.begin(), seen.end(), name) != seen.end()) {
      r = {false, "another " + std::string(stage) + " kernel already has this name"};
    } else if (!entry.second) {
      r = {false, "the kernel is empty"};
    } else {
      r = check(entry.second);
    }
    seen.push_back(name);
    if (r.ok) {
      std::fprintf(stderr, "nucleus bench: %s kernel '%s' passed the correctness check\n", stage,
                   name.c_str());
      passed.push_back(&entry);
    } else {
      std::fprintf(stderr, "nucleus bench: %s kernel '%s' REJECTED (not benchmarked): %s\n", stage,
                   name.c_str(), r.message.c_str());
      ++rejected;
    }
  }
  if (passed.empty()) return rejected;
  if (const check_result r = check(ours_kernel); !r.ok)
    std::fprintf(stderr, "nucleus bench: WARNING: nucleus's own %s fails the same check: %s\n", stage,
                 r.message.c_str());
  const std::string ours_name = std::string("BM_ours_") + stage;
  for (const std::int64_t& v : vocab_sizes) {
    register_per_target(ours_name, ours, std::span<const std::int64_t>(&v, 1));
    for (const auto* entry : passed) {
      const std::string name = std::string("BM_custom_") + stage + "/" + entry->first;
      const Kernel* kernel = &entry->second;  // the queue outlives the run
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { custom(s, *kernel); })
          ->Arg(v)
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return rejected;
}

}  // namespace detail

// Queues a top-k kernel; run() checks it and, if it is correct, benchmarks it at k = bench_top_k.
inline bool register_top_k_kernel(std::string name, top_k_kernel kernel) {
  detail::queued().top_k.emplace_back(std::move(name), std::move(kernel));
  return true;
}

// Queues an argmax kernel; run() checks it and, if it is correct, benchmarks it.
inline bool register_argmax_kernel(std::string name, argmax_kernel kernel) {
  detail::queued().argmax.emplace_back(std::move(name), std::move(kernel));
  return true;
}

// A benchmark main: the floors first for every V (BM_onepass, and BM_expfloor when use_exp_floor()
// gave one), then `register_more` (a binary's own benchmarks), then the checked custom kernels next to
// ours. Our flags: --nucleus_strict (return 1, before timing anything, if a custom kernel was
// rejected), --nucleus_cpu_time (passes from CPU time, not wall time) and --nucleus_isa (the targets
// register_per_target registers for). Every other flag is Google Benchmark's.
inline int run(int argc, char** argv, const std::function<void()>& register_more = {}) {
  bool strict = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string_view a = i > 0 ? argv[i] : "";
    if (a == "--nucleus_strict") {
      strict = true;
    } else if (a == "--nucleus_cpu_time") {
      use_cpu_time_for_passes(true);
    } else if (a.starts_with("--nucleus_isa=")) {
      if (!detail::parse_targets(a.substr(a.find('=') + 1))) return 1;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(args.size());
  args.push_back(nullptr);
  benchmark::Initialize(&n, args.data(), [] {
    benchmark::PrintDefaultHelp();
    std::fprintf(stdout,
                 "  [--nucleus_strict]   exit 1 before timing if a custom kernel fails its check\n"
                 "  [--nucleus_cpu_time] passes from thread CPU time instead of wall time\n"
                 "  [--nucleus_isa=all|<target>,...] run each nucleus benchmark under each target\n"
                 "                       (%s; default: the active one)\n",
                 detail::built_target_names().c_str());
  });
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 1;
  std::string names;
  for (nucleus::isa t : bench_targets())
    names += std::string(names.empty() ? "" : ",") + nucleus::isa_name(t);
  benchmark::AddCustomContext("nucleus_targets", names);

  register_onepass();
  if (register_more) register_more();
  detail::custom_kernels& q = detail::queued();
  int rejected = 0;
  rejected += detail::check_and_register(
      "top_k", q.top_k, [](const top_k_kernel& k) { return check_top_k_kernel(k); },
      detail::ours_top_k_kernel, [](benchmark::State& s) { detail::BM_ours_top_k(s, bench_top_k); },
      [](benchmark::State& s, const top_k_kernel& k) { detail::BM_custom_top_k(s, k, bench_top_k); });
  rejected += detail::check_and_register(
      "argmax", q.argmax, [](const argmax_kernel& k) { return check_argmax_kernel(k); },
      detail::ours_argmax_kernel, detail::BM_ours_argmax,
      [](benchmark::State& s, const argmax_kernel& k) { detail::BM_custom_argmax(s, k); });
  if (strict && rejected > 0) {
    std::fprintf(stderr, "nucleus bench: %d custom kernel(s) rejected; --nucleus_strict: not running\n",
                 rejected);
    benchmark::Shutdown();
    return 1;
  }

  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace nucleus::bench
