// The kernel tests' view of the targets: the ones this build runs, scalar first, and a guard that
// restores the target chosen at start-up.
#pragma once

#include <iterator>
#include <vector>

#include <nucleus/simd/isa.hpp>

namespace nucleus_test {

inline std::vector<nucleus::isa> runnable_isas() {
  std::vector<nucleus::isa> r;
  for (auto t = std::rbegin(nucleus::all_isas); t != std::rend(nucleus::all_isas); ++t)  // scalar first
    if (nucleus::isa_supported(*t)) r.push_back(*t);
  return r;
}

struct isa_guard {
  nucleus::isa saved = nucleus::active_isa();
  ~isa_guard() { nucleus::set_isa(saved); }
};

}  // namespace nucleus_test
