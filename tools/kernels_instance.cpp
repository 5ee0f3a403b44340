// Every kernel of every target, compiled once for all of this build's programs: the tests, benchmarks,
// examples and the server link nucleus_kernels_once (CMakeLists.txt) instead of each compiling them.
#include <nucleus/simd/kernels_instance.hpp>
