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
      std::fprintf(f, "case %zu V=%zu token=%d logprob=%08x status=%d dist=%d/%d/%zu/%016llx ops=%016llx\n",
                   c.index, c.row.size(), r.token, float_bits(r.logprob), static_cast<int>(r.status), dstatus,
                   dsorted, dsize, static_cast<unsigned long long>(dhash),
                   static_cast<unsigned long long>(ops));
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
