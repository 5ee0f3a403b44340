#include <nucleus/engine.hpp>
#include <nucleus/nucleus.hpp>

#include <array>
#include <cstdio>
#include <vector>

int main() {
  namespace nc = nucleus;
  const std::array<float, 4> logits = {0.5f, 2.0f, -1.0f, 1.0f};
  nc::workspace ws;
  const auto chain = nc::temperature(0.7f) | nc::top_k(2) | nc::categorical();
  const nc::sample_result r = chain(logits, ws, nc::draw_key{1, 0});
  const nc::sample_result g = nc::argmax()(logits, ws);

  // The engine layer: two requests with their own knobs, one batch on a two-thread pool.
  const nc::sampler greedy = nc::presets::vllm({.temperature = 0.0f});
  const nc::sampler chat = nc::presets::hf({.temperature = 0.7f, .top_p = 0.9f, .seed = 3});
  const std::vector<nc::bf16> matrix = {nc::to_bf16(0.5f), nc::to_bf16(2.0f), nc::to_bf16(-1.0f),
                                        nc::to_bf16(1.0f), nc::to_bf16(3.0f), nc::to_bf16(0.0f),
                                        nc::to_bf16(0.0f), nc::to_bf16(0.0f)};
  const std::vector<nc::batch_row> rows = {{&greedy, {}}, {&chat, {}}};
  std::vector<nc::row_result> out(2);
  nc::thread_pool pool(2);
  nc::batch_sampler batch(4, pool.concurrency());
  batch.sample(nc::logits_matrix<nc::bf16>{matrix.data(), 2, 4, 4}, rows, out, pool);

  std::printf("nucleus %d.%d.%d: drew %d, greedy %d, batch %d %d\n", NUCLEUS_VERSION_MAJOR,
              NUCLEUS_VERSION_MINOR, NUCLEUS_VERSION_PATCH, r.token, g.token, out[0].token, out[1].token);
  const bool core_ok = r.status == nc::status::ok && (r.token == 1 || r.token == 3) && g.token == 1;
  const bool batch_ok = out[0].token == 1 && out[1].status == nc::status::ok && out[1].token >= 0;
  return core_ok && batch_ok ? 0 : 1;
}
