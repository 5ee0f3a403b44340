// Records what the library returns for every case of reference/cases.hpp, one line per case, so builds
// with different SIMD widths (AVX-512, AVX2, scalar) can be compared byte for byte.
//   nucleus_record_X OUT [N]      write N cases (default 12000) to OUT
//   nucleus_record_X --compare A B  exit 1 and print the first differing case if A and B differ
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <type_traits>

#include <nucleus/engine.hpp>

#include "reference/cases.hpp"

namespace {

using nucleus_ref::float_bits;
using nucleus_ref::fnv1a;

constexpr std::size_t default_cases = 12000;

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
  return h;
}

int record(const char* path, std::size_t n) {
  std::FILE* f = std::fopen(path, "w");
  if (!f) {
    std::perror(path);
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

int compare(const char* a, const char* b) {
  std::ifstream fa(a), fb(b);
  if (!fa || !fb) {
    std::cerr << "cannot read " << (fa ? b : a) << "\n";
    return 2;
  }
  std::string la, lb;
  std::size_t line = 0;
  for (;;) {
    bool ga = static_cast<bool>(std::getline(fa, la)), gb = static_cast<bool>(std::getline(fb, lb));
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
  fb.seekg(0, std::ios::end);
  if (fa.tellg() != fb.tellg()) {
    std::cerr << "files differ in size\n";
    return 1;
  }
  std::cout << line - 1 << " lines identical\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "--compare") return compare(argv[2], argv[3]);
  if (argc == 2 || argc == 3)
    return record(argv[1], argc == 3 ? std::strtoul(argv[2], nullptr, 10) : default_cases);
  std::cerr << "usage: " << argv[0] << " OUT [N] | --compare A B\n";
  return 2;
}
