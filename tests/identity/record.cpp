// Records what the library returns for every case of reference/cases.hpp, one line per case, so every
// dispatched target and every consumer's build (compiler, -march, -O, -ffp-contract) can be compared
// byte for byte.
//   nucleus_record OUT [N] [--isa NAME]  write N cases (default 12000) to OUT, on target NAME if given
//   nucleus_record --compare A B         exit 1 and print the first differing case if A and B differ
//   nucleus_record --compare-prefix A REF LINES
//                                        A holds exactly LINES cases, and they are REF's first LINES
//                                        byte for byte (case i depends on i alone: a shorter record
//                                        under an emulator checks the same cases as far as it goes)
// A target this build or CPU lacks is not replaced by another: the run exits 77 (skipped) and leaves
// OUT.skipped saying why, so comparing OUT later skips too instead of failing on a missing file.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <type_traits>

#include <nucleus/engine.hpp>
#include <nucleus/simd/isa.hpp>

#include "reference/cases.hpp"

namespace {

using nucleus_ref::float_bits;
using nucleus_ref::fnv1a;

constexpr std::size_t default_cases = 12000;
constexpr int exit_skipped = 77;  // ctest's SKIP_RETURN_CODE for these tests

std::string skip_marker(const std::string& path) {
  return path + ".skipped";
}

// How this binary was built, for the log: what decides whether a build may differ from another.
std::string build_description() {
  std::string d;
#if defined(__clang__)
  d += "clang " __clang_version__;
#elif defined(__GNUC__)
  d += "gcc " __VERSION__;
#endif
#if defined(__AVX512F__)
  d += ", avx512f";
#elif defined(__AVX2__)
  d += ", avx2";
#elif defined(__SSE4_2__)
  d += ", sse4.2";
#elif defined(__SSE2__)
  d += ", sse2";
#endif
#if defined(__FMA__)
  d += " fma";
#endif
#if defined(__OPTIMIZE__)
  d += ", optimized";
#endif
#if defined(NUCLEUS_NO_SIMD)
  d += ", NUCLEUS_NO_SIMD";
#endif
#if defined(NUCLEUS_ISA_ONLY)
  d += ", NUCLEUS_ISA_ONLY=" + std::to_string(NUCLEUS_ISA_ONLY);
#endif
  return d;
}

std::uint64_t hash_distribution(const nucleus::distribution& d) {
  std::uint64_t h = nucleus_ref::fnv_offset;
  for (std::size_t i = 0; i < d.size(); ++i) {
    std::int32_t id = d.ids()[i];
    std::uint32_t p = float_bits(d.probs()[i]);
    h = fnv1a(h, &id, sizeof id);
    h = fnv1a(h, &p, sizeof p);
  }
  return h;
}

// log_softmax and top_logprobs(8) of the row, hashed (both are part of the bit-identity contract).
std::uint64_t hash_ops(std::span<const float> row, nucleus::workspace& ws, std::vector<float>& out) {
  std::uint64_t h = nucleus_ref::fnv_offset;
  if (row.empty()) return h;
  out.resize(row.size());
  auto s = static_cast<int>(nucleus::log_softmax(row, out));
  h = fnv1a(h, &s, sizeof s);
  for (float x : out) {
    std::uint32_t b = float_bits(x);
    h = fnv1a(h, &b, sizeof b);
  }
  for (const nucleus::token_logprob& t : nucleus::top_logprobs(row, 8, ws)) {
    std::uint32_t b = float_bits(t.logprob);
    h = fnv1a(h, &t.token, sizeof t.token);
    h = fnv1a(h, &b, sizeof b);
  }
  return h;
}

// Field by field: the structs have padding bytes.
std::uint64_t hash_fields(std::uint64_t h, std::int32_t token, float logprob, int status,
                          std::int32_t rank = 0, std::uint32_t count = 0) {
  const std::uint32_t words[] = {static_cast<std::uint32_t>(token), float_bits(logprob),
                                 static_cast<std::uint32_t>(status), static_cast<std::uint32_t>(rank), count};
  return fnv1a(h, words, sizeof words);
}
std::uint64_t hash_result(std::uint64_t h, const nucleus::sample_result& r) {
  return hash_fields(h, r.token, r.logprob, static_cast<int>(r.status));
}
std::uint64_t hash_result(std::uint64_t h, const nucleus::row_result& r) {
  return hash_fields(h, r.token, r.logprob, static_cast<int>(r.status), r.rank, r.top_count);
}
std::uint64_t hash_result(std::uint64_t h, const nucleus::token_logprob& t) {
  return hash_fields(h, t.token, t.logprob, 0);
}

// The rest of the sampler vocabulary (typical, top-n-sigma, XTC, epsilon, eta, dynamic temperature,
// mirostat 1 and 2, DRY, no-repeat-ngram) through the presets that have each: which knobs are on, and
// their values, vary with the case, so each stage runs alone and beside the others.
std::uint64_t hash_vocabulary(const nucleus_cases::test_case& c, std::span<const std::int32_t> hist,
                              nucleus::workspace& ws) {
  std::uint64_t h = nucleus_ref::fnv_offset;
  if (c.row.empty()) return h;
  const std::size_t i = c.index, k = i / 4;
  nucleus::sampling_params p;
  p.seed = c.key.seed;
  p.logprobs = 2;
  p.temperature = 0.6f + 0.1f * static_cast<float>(k % 7);
  auto order = nucleus::engine_order::llama_cpp;
  float mu = 0.0f;
  switch (i % 4) {
    case 0:  // llama.cpp's chain
      p.top_n_sigma = k % 3 == 0 ? 0.5f + 0.25f * static_cast<float>(k % 5) : -1.0f;
      p.typical_p = k % 5 < 2 ? 0.2f + 0.15f * static_cast<float>(k % 4) : 1.0f;
      p.min_p = k % 2 ? 0.3f : 0.0f;  // after typical or xtc: against the largest remaining logit
      p.xtc_probability = k % 4 == 1 ? 1.0f : k % 4 == 2 ? 0.5f : 0.0f;
      p.xtc_threshold = 0.02f * static_cast<float>(1 + k % 6);
      p.dynatemp_range = k % 2 ? 0.5f : 0.0f;
      p.dynatemp_exponent = 0.5f + 0.5f * static_cast<float>(k % 3);
      p.dry_multiplier = k % 3 == 1 ? 0.8f : 0.0f;
      p.dry_allowed_length = static_cast<int>(k % 3);
      p.dry_sequence_breakers = {{hist[0]}};
      p.min_keep = 1 + static_cast<int>(k % 3);
      break;
    case 1:  // mirostat 1 and 2 (llama.cpp), mu carried from the draw into the record
      p.mirostat = 1 + static_cast<int>(k % 2);
      p.mirostat_tau = 2.0f + static_cast<float>(k % 5);
      p.mirostat_eta = 0.1f;
      mu = nucleus::mirostat_initial_mu(p.mirostat_tau);
      break;
    case 2:  // Hugging Face's warpers and no-repeat-ngram
      order = nucleus::engine_order::hf;
      p.typical_p = k % 3 == 0 ? 0.9f : 1.0f;
      p.epsilon_cutoff = k % 3 == 1 ? 3e-4f : 0.0f;
      p.eta_cutoff = k % 3 == 2 ? 3e-4f * static_cast<float>(1 + k % 4) : 0.0f;
      p.no_repeat_ngram_size = static_cast<int>(k % 4);
      p.min_keep = 1 + static_cast<int>(k % 2);
      break;
    default:  // nucleus's own order, everything at once
      order = nucleus::engine_order::nucleus;
      p.typical_p = 0.95f;
      p.top_n_sigma = 2.0f;
      p.epsilon_cutoff = 1e-5f;
      p.eta_cutoff = 1e-5f;
      p.xtc_probability = 1.0f;
      p.dynatemp_range = 0.3f;
      break;
  }
  const nucleus::sampler s(p, order);
  const nucleus::row_request rq{
      hist.first(4), hist.subspan(4), {}, c.key.position, p.mirostat ? &mu : nullptr};
  nucleus::token_logprob top[2] = {};
  h = hash_result(h, s.sample(std::span<const float>(c.row), ws, rq, top));
  for (const auto& t : top) h = hash_result(h, t);
  const std::uint32_t mu_bits = float_bits(mu);
  return fnv1a(h, &mu_bits, sizeof mu_bits);
}

// The same case on 16-bit rows (the row rounded to bf16 and to f16: other values, so other results,
// but each must be the same in every build), and through an engine sampler with processors.
std::uint64_t hash_engine(const nucleus_cases::test_case& c, nucleus::workspace& ws) {
  std::uint64_t h = nucleus_ref::fnv_offset;
  if (c.row.empty()) return h;
  std::vector<nucleus::bf16> b(c.row.size());
  std::vector<nucleus::f16> f(c.row.size());
  for (std::size_t i = 0; i < c.row.size(); ++i) {
    b[i] = nucleus::to_bf16(c.row[i]);
    const float x = c.row[i];  // f16 bits by truncation: any 16-bit pattern is a fine test input
    f[i] = nucleus::f16{static_cast<std::uint16_t>(nucleus_ref::float_bits(x) >> 16)};
  }
  const auto V = c.row.size();
  nucleus::sampling_params p;
  p.temperature = 0.8f;
  p.top_k = static_cast<int>(c.index % 50);
  p.top_p = 0.9f;
  p.min_p = c.index % 3 == 0 ? 0.05f : 0.0f;
  p.repetition_penalty = 1.2f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.logit_bias = {{static_cast<std::int32_t>(c.index % V), 2.0f}};
  p.seed = c.key.seed;
  p.logprobs = 4;
  p.logprobs_mode = c.index % 2 ? nucleus::logprob_mode::raw : nucleus::logprob_mode::processed;
  const auto order = static_cast<nucleus::engine_order>(c.index % 4);
  if (order == nucleus::engine_order::hf) p.presence_penalty = p.frequency_penalty = 0.0f;
  const nucleus::sampler s(p, order);
  std::vector<std::int32_t> hist;
  for (std::size_t i = 0; i < 12; ++i) hist.push_back(static_cast<std::int32_t>((c.index * 7 + i * i) % V));
  std::vector<std::uint32_t> mask((V + 31) / 32);
  std::uint64_t state = c.index;
  for (auto& w : mask) w = static_cast<std::uint32_t>(nucleus_ref::splitmix64_next(state)) | 1u;
  const nucleus::row_request rq{std::span(hist).first(4), std::span(hist).subspan(4), mask, c.key.position};
  nucleus::token_logprob top[4] = {};
  h = hash_result(h, nucleus::chain(nucleus::top_k(20), nucleus::categorical())(
                         std::span<const nucleus::bf16>(b), ws, c.key));
  h = hash_result(h, nucleus::categorical()(std::span<const nucleus::f16>(f), ws, c.key));
  h = hash_result(h, s.sample(std::span<const nucleus::bf16>(b), ws, rq, top));
  for (const auto& t : top) h = hash_result(h, t);
  h = hash_result(h, s.sample(std::span<const float>(c.row), ws, rq, top));
  for (const auto& t : top) h = hash_result(h, t);
  const std::uint64_t v = hash_vocabulary(c, hist, ws);
  return fnv1a(h, &v, sizeof v);
}

int record(const std::string& path, std::size_t n) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) {
    std::perror(path.c_str());
    return 2;
  }
  nucleus::workspace ws;
  std::vector<float> out;
  nucleus_cases::for_each_case(n, [&](const nucleus_cases::test_case& c) {
    nucleus_cases::with_chain(c.chain, [&](const auto& proc, const auto& chain) {
      std::size_t dsize = 0;
      int dstatus = -1, dsorted = -1;
      std::uint64_t dhash = 0;
      if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(proc)>, nucleus_cases::no_proc>) {
        nucleus::distribution d = proc(c.row, ws);
        dsize = d.size();
        dstatus = static_cast<int>(d.status());
        dsorted = d.sorted() ? 1 : 0;
        dhash = hash_distribution(d);
      }
      nucleus::sample_result r = chain(c.row, ws, c.key);
      std::uint64_t ops = hash_ops(c.row, ws, out);
      std::uint64_t eng = hash_engine(c, ws);
      std::fprintf(f,
                   "case %zu V=%zu token=%d logprob=%08x status=%d dist=%d/%d/%zu/%016llx ops=%016llx "
                   "engine=%016llx\n",
                   c.index, c.row.size(), r.token, float_bits(r.logprob), static_cast<int>(r.status), dstatus,
                   dsorted, dsize, static_cast<unsigned long long>(dhash),
                   static_cast<unsigned long long>(ops), static_cast<unsigned long long>(eng));
    });
  });
  return std::fclose(f) == 0 ? 0 : 2;
}

// Equal files are not enough: a recorder that wrote nothing, or stopped early, in both would pass.
// `lines` is the count both must hold (0: any). With `prefix`, a must hold exactly `lines` and b at
// least as many, and a equals b's first `lines` lines byte for byte.
int compare(const std::string& a, const std::string& b, std::size_t lines, bool prefix = false) {
  for (const std::string& p : {a, b}) {
    if (!std::filesystem::exists(p) && std::filesystem::exists(skip_marker(p))) {
      std::ifstream marker(skip_marker(p));
      std::string why;
      std::getline(marker, why);
      std::cout << "skipped: " << p << " was not recorded: " << why << "\n";
      return exit_skipped;
    }
  }
  std::ifstream fa(a), fb(b);
  if (!fa || !fb) {
    std::cerr << "cannot read " << (fa ? b : a) << "\n";
    return 2;
  }
  std::string la, lb;
  std::size_t line = 0;
  for (;;) {
    bool ga = static_cast<bool>(std::getline(fa, la));
    bool gb = prefix && line == lines ? false : static_cast<bool>(std::getline(fb, lb));
    ++line;
    if (!ga && !gb) break;
    if (ga != gb || la != lb) {
      std::cerr << "first difference at line " << line << ":\n  " << a << ": " << (ga ? la : "<end>")
                << "\n  " << b << ": " << (gb ? lb : "<end>") << "\n";
      return 1;
    }
  }
  // getline drops the final newline's absence; compare sizes so the files are equal byte for byte.
  fa.clear();
  fb.clear();
  fa.seekg(0, std::ios::end);
  if (!prefix) fb.seekg(0, std::ios::end);  // (with prefix: where b's first `lines` lines end)
  if (fa.tellg() != fb.tellg()) {
    std::cerr << "files differ in size\n";
    return 1;
  }
  if (lines != 0 && line - 1 != lines) {
    std::cerr << "both files hold " << line - 1 << " lines, not the " << lines << " cases recorded\n";
    return 1;
  }
  std::cout << line - 1 << " lines identical" << (prefix ? " to the reference's first ones" : "") << "\n";
  return 0;
}

int usage(const char* self) {
  std::cerr
      << "usage: " << self
      << " OUT [N] [--isa scalar|sse2|avx2|avx512|neon|sve256] | --compare A B [LINES] | --compare-prefix A "
         "REF LINES\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if ((argc == 4 || argc == 5) && std::string(argv[1]) == "--compare")
    return compare(argv[2], argv[3], argc == 5 ? std::strtoul(argv[4], nullptr, 10) : 0);
  if (argc == 5 && std::string(argv[1]) == "--compare-prefix") {
    const std::size_t lines = std::strtoul(argv[4], nullptr, 10);
    if (lines == 0) return usage(argv[0]);
    return compare(argv[2], argv[3], lines, /*prefix=*/true);
  }
  std::optional<std::string> out;
  std::optional<std::size_t> n;
  std::optional<nucleus::isa> target;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--isa") {
      if (i + 1 == argc) return usage(argv[0]);
      target = nucleus::parse_isa(argv[++i]);
      if (!target) {
        std::cerr << "unknown target '" << argv[i] << "'\n";
        return usage(argv[0]);
      }
    } else if (arg.starts_with("--")) {
      return usage(argv[0]);
    } else if (!out) {
      out = arg;
    } else if (!n) {
      n = std::strtoul(arg.c_str(), nullptr, 10);
    } else {
      return usage(argv[0]);
    }
  }
  if (!out) return usage(argv[0]);
  std::filesystem::remove(*out);
  std::filesystem::remove(skip_marker(*out));
  std::cout << "build: " << build_description() << "\n";
  if (target && !nucleus::set_isa(*target)) {
    const std::string why = std::string("target ") + nucleus::isa_name(*target) +
                            " is not supported here (not compiled into this build, or not on this CPU)";
    std::ofstream(skip_marker(*out)) << why << "\n";
    std::cout << "skipped: " << why << "\n";
    return exit_skipped;
  }
  const std::size_t cases = n.value_or(default_cases);
  const int rc = record(*out, cases);
  // Asked after the run: the target the kernels actually used, whatever chose it.
  std::cout << "recorded " << cases << " cases on target " << nucleus::isa_name(nucleus::active_isa())
            << " to " << *out << "\n";
  return rc;
}
