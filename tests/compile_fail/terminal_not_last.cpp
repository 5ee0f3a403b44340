// expect: nothing can follow a terminal stage
#include <nucleus/nucleus.hpp>
auto bad = nucleus::categorical() | nucleus::top_k(5);
