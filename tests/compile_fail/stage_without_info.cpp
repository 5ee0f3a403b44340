// expect: a stage declares `static constexpr nucleus::stage_info info
#include <nucleus/nucleus.hpp>
#include <vector>
struct no_info_stage : nucleus::stage<no_info_stage> {  // forgot its stage_info
  void apply(nucleus::row_state&) const {}
};
int main() {
  std::vector<float> row(10);
  nucleus::workspace ws;
  (no_info_stage{} | nucleus::argmax())(row, ws);
}
