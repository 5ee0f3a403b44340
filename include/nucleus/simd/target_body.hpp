// Everything compiled once per target, in dependency order: the target's registers, the packs, the
// kernels. simd/targets.hpp includes this inside each target's namespace; included on its own, it
// brings in the dispatcher.
#if !defined(NUCLEUS_TARGET_ISA)
#include "nucleus/simd/targets.hpp"
#else
// clang-format off
#include "nucleus/simd/registers.hpp"
#include "nucleus/simd/pack.hpp"
#include "nucleus/kernels/reduce.hpp"
#include "nucleus/kernels/filter.hpp"
#include "nucleus/kernels/select.hpp"
// clang-format on
#endif
