// expect: a stage implements `void apply\(row_state&\) const`
#include <nucleus/nucleus.hpp>
#include <vector>
struct misnamed_stage : nucleus::stage<misnamed_stage> {
  static constexpr nucleus::stage_info info{};
  void run(nucleus::row_state&) const {}  // not apply
};
int main() {
  std::vector<float> row(10);
  nucleus::workspace ws;
  (misnamed_stage{} | nucleus::argmax())(row, ws);
}
