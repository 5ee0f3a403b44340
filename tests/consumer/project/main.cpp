#include <nucleus/nucleus.hpp>

#include <array>
#include <cstdio>

int main() {
  namespace nc = nucleus;
  const std::array<float, 4> logits = {0.5f, 2.0f, -1.0f, 1.0f};
  nc::workspace ws;
  const auto chain = nc::temperature(0.7f) | nc::top_k(2) | nc::categorical();
  const nc::sample_result r = chain(logits, ws, nc::draw_key{1, 0});
  const nc::sample_result g = nc::argmax()(logits, ws);
  std::printf("nucleus %d.%d.%d: drew %d, greedy %d\n", NUCLEUS_VERSION_MAJOR, NUCLEUS_VERSION_MINOR,
              NUCLEUS_VERSION_PATCH, r.token, g.token);
  return (r.status == nc::status::ok && (r.token == 1 || r.token == 3) && g.token == 1) ? 0 : 1;
}
