// One kernel or chain, run once over a row of V logits, for counting instructions under an emulator
// (scripts/arm-instructions runs it with qemu-user, one instruction per translated block, and counts
// them): `instructions KERNEL V`, KERNEL one of none, max, exp_sum, select_top_k, compact_ge,
// categorical, top_k, top_p, min_p. "none" builds the row and stops: the baseline the others subtract.
// The target is the active one (NUCLEUS_ISA=sve256|neon|scalar).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "nucleus/nucleus.hpp"

namespace nc = nucleus;
namespace d = nucleus::detail;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: instructions KERNEL V\n");
    return 2;
  }
  const std::string kernel = argv[1];
  const std::size_t v = std::strtoul(argv[2], nullptr, 10);
  std::vector<float> row(v);
  std::uint64_t s = 12345;
  for (float& x : row) {  // a plain LCG: cheap, so the baseline stays small next to the kernels
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<std::int32_t>(s >> 40) - (1 << 23)) * 0x1p-20f;
  }
  nc::workspace ws;
  ws.reserve(v);
  std::vector<std::uint64_t> keys(d::select_capacity(50)), blocks(v / d::block_elems + 2);
  std::vector<float> vals(v + d::compact_slack);
  std::vector<std::int32_t> ids(v + d::compact_slack);
  const float max = d::max_value(row.data(), v);
  std::uint64_t sink = 0;
  if (kernel == "none") {
  } else if (kernel == "max") {
    sink = static_cast<std::uint64_t>(d::max_value(row.data(), v));
  } else if (kernel == "exp_sum") {
    sink = static_cast<std::uint64_t>(d::exp_sum(row.data(), v, max, 1.0f, blocks.data()));
  } else if (kernel == "select_top_k") {
    sink = d::select_top_k(row.data(), nullptr, v, 50, keys.data());
  } else if (kernel == "compact_ge") {
    sink = d::compact_ge(row.data(), nullptr, v, max, 1.0f, -3.0f, vals.data(), ids.data());
  } else {
    const std::span<const float> x(row);
    const nc::draw_key key{7, 0, 0};
    if (kernel == "categorical")
      sink = static_cast<std::uint64_t>(nc::categorical()(x, ws, key).token);
    else if (kernel == "top_k")
      sink = static_cast<std::uint64_t>((nc::top_k(50) | nc::categorical())(x, ws, key).token);
    else if (kernel == "top_p")
      sink = static_cast<std::uint64_t>((nc::top_p(0.9f) | nc::categorical())(x, ws, key).token);
    else if (kernel == "min_p")
      sink = static_cast<std::uint64_t>((nc::min_p(0.05f) | nc::categorical())(x, ws, key).token);
    else {
      std::fprintf(stderr, "unknown kernel %s\n", kernel.c_str());
      return 2;
    }
  }
  std::printf("%s on %s: %llu\n", kernel.c_str(), nc::isa_name(nc::active_isa()),
              static_cast<unsigned long long>(sink));
  return 0;
}
