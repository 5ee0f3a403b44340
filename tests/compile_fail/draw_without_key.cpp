// expect: call it with a draw_key
#include <nucleus/nucleus.hpp>
#include <vector>
int main() {
  std::vector<float> row(10);
  nucleus::workspace ws;
  (nucleus::top_p(0.9f) | nucleus::categorical())(row, ws);
}
