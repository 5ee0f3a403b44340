// expect: a terminal stage implements `sample_result finish\(row_state&, draw_key\) const`
#include <nucleus/nucleus.hpp>
#include <vector>
struct pick_first_stage : nucleus::stage<pick_first_stage> {
  static constexpr nucleus::stage_info info{.terminal = true};
  int finish(nucleus::row_state&) const { return 0; }  // wrong signature
};
int main() {
  std::vector<float> row(10);
  nucleus::workspace ws;
  (nucleus::top_k(3) | pick_first_stage{})(row, ws);
}
