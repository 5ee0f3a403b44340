// expect: call it with a draw_key
#include <nucleus/nucleus.hpp>
#include <vector>
int main() {
  std::vector<float> row(10);
  nucleus::workspace ws;
  (nucleus::xtc(0.5f, 0.1f) | nucleus::top_k(3))(row, ws);  // xtc flips a keyed coin
}
