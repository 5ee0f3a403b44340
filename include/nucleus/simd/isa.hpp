// The instruction sets nucleus's kernels are compiled for, and the one they run on.
//
// Every kernel is compiled once per target (simd/targets.hpp) and the best one the CPU supports is
// chosen once, at first use, from CPUID; NUCLEUS_ISA=scalar|sse2|avx2|avx512|neon|sve256 in the
// environment or set_isa() overrides it. All targets give the same bits (docs/semantics.md), so the
// choice is only one of speed. Compile-time pins: NUCLEUS_NO_SIMD (scalar only) or
// NUCLEUS_ISA_ONLY=<0..5>.
//
// sve256 is opt-in: an aarch64 build defines NUCLEUS_SVE256 and passes -msve-vector-bits=256 (GCC;
// docs/design.md). Its registers hold 8 floats, so it runs only where the kernel reports a 256-bit
// SVE vector length (Graviton3, Neoverse V1); NEON everywhere else.
#pragma once

#include <atomic>
#include <cstdlib>
#include <optional>
#include <string_view>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(NUCLEUS_SVE256) && defined(__linux__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#endif

namespace nucleus {

enum class isa : int { scalar = 0, sse2 = 1, avx2 = 2, avx512 = 3, neon = 4, sve256 = 5 };

// Every target nucleus has, fastest first: the dispatcher, the kernel tests and the benchmark read
// this list. Which of them a build compiles and a CPU runs: isa_supported().
inline constexpr isa all_isas[] = {isa::avx512, isa::avx2, isa::sse2, isa::sve256, isa::neon, isa::scalar};

namespace detail {

#if defined(NUCLEUS_NO_SIMD)
#define NUCLEUS_ISA_ONLY 0
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define NUCLEUS_X86 1
#else
#define NUCLEUS_X86 0
#endif
// aarch64, where AdvSIMD is part of the baseline (little-endian: the lane order the kernels assume).
#if defined(__aarch64__) && defined(__ARM_NEON) && !defined(__AARCH64EB__) && \
    (defined(__GNUC__) || defined(__clang__))
#define NUCLEUS_ARM64 1
#else
#define NUCLEUS_ARM64 0
#endif
// The opt-in SVE target (Linux on aarch64, GCC: its target pragma and fixed-length SVE types).
#if NUCLEUS_ARM64 && defined(NUCLEUS_SVE256) && defined(__linux__) && !defined(__clang__) && \
    (!defined(NUCLEUS_ISA_ONLY) || NUCLEUS_ISA_ONLY == 5)
#define NUCLEUS_SVE256_TARGET 1
#else
#define NUCLEUS_SVE256_TARGET 0
#endif
#if defined(NUCLEUS_ISA_ONLY) && NUCLEUS_ISA_ONLY == 5 && !NUCLEUS_SVE256_TARGET
#error \
    "NUCLEUS_ISA_ONLY=5 (sve256) needs an aarch64 Linux build with GCC, NUCLEUS_SVE256 and -msve-vector-bits=256"
#endif

// Which targets this build compiles: all x86 ones on x86 (no flags needed), NEON and scalar on
// aarch64 (and sve256 where the build opts in), scalar elsewhere.
constexpr bool compiled([[maybe_unused]] isa t) noexcept {
#if defined(NUCLEUS_ISA_ONLY)
  return static_cast<int>(t) == NUCLEUS_ISA_ONLY;
#elif NUCLEUS_X86
  return t != isa::neon && t != isa::sve256;
#elif NUCLEUS_ARM64 && NUCLEUS_SVE256_TARGET
  return t == isa::sve256 || t == isa::neon || t == isa::scalar;
#elif NUCLEUS_ARM64
  return t == isa::neon || t == isa::scalar;
#else
  return t == isa::scalar;
#endif
}

#if NUCLEUS_X86
// F16C (CPUID.1:ECX bit 29): clang's __builtin_cpu_supports has no name for it.
inline bool cpu_has_f16c() noexcept {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

inline bool cpu_has(isa t) noexcept {
#if NUCLEUS_X86
  __builtin_cpu_init();  // may run before libgcc's own constructor (static initialisers)
  switch (t) {
    case isa::scalar:
    case isa::sse2:
      return true;
    case isa::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case isa::avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    case isa::neon:
    case isa::sve256:
      return false;
  }
  return false;
#elif NUCLEUS_ARM64
#if NUCLEUS_SVE256_TARGET
  // SVE, and the vector length this process runs at: 32 bytes (Linux: prctl; qemu-user's
  // -cpu max,sve256=on sets it).
  if (t == isa::sve256)
    return (getauxval(AT_HWCAP) & HWCAP_SVE) != 0 && (prctl(PR_SVE_GET_VL) & PR_SVE_VL_LEN_MASK) == 32;
#endif
  return t == isa::scalar || t == isa::neon;
#else
  return t == isa::scalar;
#endif
}

}  // namespace detail

inline constexpr const char* isa_name(isa t) noexcept {
  switch (t) {
    case isa::scalar:
      return "scalar";
    case isa::sse2:
      return "sse2";
    case isa::avx2:
      return "avx2";
    case isa::avx512:
      return "avx512";
    case isa::neon:
      return "neon";
    case isa::sve256:
      return "sve256";
  }
  return "?";
}

inline constexpr std::optional<isa> parse_isa(std::string_view s) noexcept {
  for (isa t : all_isas)
    if (s == isa_name(t)) return t;
  return std::nullopt;
}

// Compiled into this build and runnable on this CPU.
inline bool isa_supported(isa t) noexcept {
  return detail::compiled(t) && detail::cpu_has(t);
}

// The fastest supported target.
inline isa best_isa() noexcept {
  for (isa t : all_isas)
    if (isa_supported(t)) return t;
  return isa::scalar;  // a pinned target the CPU lacks: it is what this build has
}

namespace detail {

// The environment's choice, if it names a supported target; otherwise the best one.
inline isa initial_isa() noexcept {
  if (const char* e = std::getenv("NUCLEUS_ISA")) {
    if (const auto t = parse_isa(e); t && isa_supported(*t)) return *t;
  }
  return best_isa();
}

inline std::atomic<int>& active_isa_slot() noexcept {
  static std::atomic<int> slot{static_cast<int>(initial_isa())};
  return slot;
}

}  // namespace detail

// The target the kernels run on now.
inline isa active_isa() noexcept {
  return static_cast<isa>(detail::active_isa_slot().load(std::memory_order_relaxed));
}

// Runs every later kernel call on target t (for tests and benchmarks); false, and no change, if t
// is not supported. Results do not depend on the target, only speed does.
inline bool set_isa(isa t) noexcept {
  if (!isa_supported(t)) return false;
  detail::active_isa_slot().store(static_cast<int>(t), std::memory_order_relaxed);
  return true;
}

}  // namespace nucleus
