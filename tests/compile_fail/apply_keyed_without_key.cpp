// expect: call apply\(state, draw_key\)
#include <nucleus/nucleus.hpp>
#include <vector>
int main() {
  std::vector<float> row(10);
  nucleus::workspace ws;
  nucleus::row_state s(std::span<const float>(row), ws);
  (nucleus::top_k(3) | nucleus::xtc(0.5f, 0.1f)).apply(s);
}
