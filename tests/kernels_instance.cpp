// Every kernel of every target, compiled once for all the test binaries (tests/CMakeLists.txt).
#include <nucleus/simd/kernels_instance.hpp>
