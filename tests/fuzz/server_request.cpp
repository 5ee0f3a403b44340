// libFuzzer harness: nucleus-server's request bodies (tools/server/api.hpp) for every endpoint, then
// the samplers the server would build from them. Every rejection must be an api_error naming a
// parameter (or a malformed body); any other exception escapes and is a finding, as is a crash.
//
// Input: a byte choosing the endpoint, then the body.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nucleus/engine.hpp>

#include "../../tools/server/api.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace nucleus::server;
  if (size < 1) return 0;
  const endpoint kinds[] = {endpoint::completions, endpoint::chat, endpoint::distribution};
  const endpoint kind = kinds[data[0] % 3];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    generation_request r = parse_request(body, kind);
    if (r.n < 1 || r.n > limits{}.max_n) __builtin_trap();  // the limits hold for what is accepted
    if (r.stop.size() > limits{}.max_stop) __builtin_trap();
    try {
      const nucleus::sampler s(r.params, r.order);
      (void)s;
    } catch (const std::invalid_argument& e) {
      const api_error mapped = sampler_error(e);
      if (mapped.param.empty() || mapped.status != 400) __builtin_trap();
      (void)mapped.body().dump();
    }
  } catch (const api_error& e) {
    if (e.status != 400) __builtin_trap();
    (void)e.body().dump(-1, ' ', false, json::error_handler_t::replace);
  }
  return 0;
}
