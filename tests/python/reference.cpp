// The C++ side of python/tests/test_same_bits.py: samples the cases of a JSON file with nc::sampler
// row by row (built with this project's flags, where the Python module has none) and prints one line
// per case, "token logprob-bits rank status top-id:logprob-bits..."; then one line per "top" case
// (nc::top_logprobs: "id:logprob-bits...") and per "verify" case (nc::draft_verifier: "accepted
// emitted status token:logprob-bits..."). The rows are the test's own files.
// (The timing side of python/bench/overhead.py is bench/py_overhead_bench.cpp.)
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nucleus/engine.hpp"
#include "nucleus/engine/knobs.hpp"

namespace nc = nucleus;
using json = nlohmann::json;

namespace {

// rows * vocab elements of T from a raw little-endian file written by the test.
template <class T>
std::vector<T> read_rows(const std::string& path, std::size_t n) {
  std::vector<T> out(n);
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(n * sizeof(T)));
  if (!f) throw std::runtime_error("short file " + path);
  return out;
}

nc::sampling_params params_of(const json& j) {
  nc::sampling_params p;
  for (const auto& [key, v] : j.items()) {
    const nc::knob* k = nc::find_knob(key);
    if (!k) throw std::runtime_error("unknown knob " + key);
    if (k->number())
      k->set(p, v.get<double>());
    else if (key == "allowed_token_ids")
      p.allowed_token_ids = v.get<std::vector<std::int32_t>>();
    else if (key == "banned_token_ids")
      p.banned_token_ids = v.get<std::vector<std::int32_t>>();
    else if (key == "logit_bias")
      for (const auto& e : v) p.logit_bias.push_back({e[0].get<std::int32_t>(), e[1].get<float>()});
    else if (key == "seed")
      p.seed = v.get<std::uint64_t>();
    else if (key == "logprobs")
      p.logprobs = v.get<int>();
    else if (key == "logprobs_mode")
      p.logprobs_mode = v.get<std::string>() == "raw" ? nc::logprob_mode::raw : nc::logprob_mode::processed;
    else
      throw std::runtime_error("no reader for " + key);
  }
  return p;
}

nc::engine_order order_of(const std::string& s) {
  for (const auto& e : nc::detail::engine_orders)
    if (s == e.name) return e.order;
  throw std::runtime_error("unknown order " + s);
}

}  // namespace

void print_logprob(std::int32_t token, float logprob) {
  std::uint32_t bits;
  std::memcpy(&bits, &logprob, 4);
  std::printf(" %d:%08x", token, bits);
}

// One line per top case: row `row` of `dtype`, its n most likely raw tokens.
template <class T>
void top_case(const std::vector<T>& rows, std::size_t vocab, const json& c, nc::workspace& ws) {
  const auto r = c["row"].get<std::size_t>();
  const auto top =
      nc::top_logprobs(std::span<const T>(rows).subspan(r * vocab, vocab), c["n"].get<std::size_t>(), ws);
  std::printf("T");
  for (const nc::token_logprob& t : top) print_logprob(t.token, t.logprob);
  std::printf("\n");
}

// One line per verify case: rows [first, first + k] of `dtype` against the draft, with the draft's
// probabilities from row `q_row` of the draft_probs file on (or none).
template <class T>
void verify_case(const std::vector<T>& rows, std::size_t vocab, const std::vector<float>& q, const json& c,
                 const std::vector<std::int32_t>& prompt, const std::vector<std::int32_t>& output,
                 nc::workspace& ws) {
  const nc::sampler s(params_of(c["params"]), order_of(c["order"].get<std::string>()));
  const auto draft = c["draft"].get<std::vector<std::int32_t>>();
  const std::size_t k = draft.size();
  const nc::logits_matrix<T> target{rows.data() + c["first"].get<std::size_t>() * vocab, k + 1, vocab, vocab};
  const long long q_row = c["q_row"].get<long long>();
  const std::span<const float> probs =
      q_row < 0 ? std::span<const float>{} : std::span<const float>(q).subspan(q_row * vocab, k * vocab);
  float mu = nc::mirostat_initial_mu(s.params().mirostat_tau);
  const nc::row_request rq{prompt, output, {}, c["position"].get<std::uint64_t>(), &mu, 0};
  std::vector<nc::row_result> out(k + 1);
  nc::draft_verifier v;
  const nc::verify_result res = v.verify(s, target, draft, probs, ws, rq, out);
  std::printf("V %u %u %d", res.accepted, res.emitted, static_cast<int>(res.status));
  for (std::uint32_t i = 0; i < res.emitted; ++i) print_logprob(out[i].token, out[i].logprob);
  std::printf("\n");
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: nucleus_py_reference CASES.json\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  const json spec = json::parse(in);
  const auto vocab = spec["vocab"].get<std::size_t>();
  const auto rows = spec["rows"].get<std::size_t>();
  const auto prompt = spec["prompt"].get<std::vector<std::int32_t>>();
  const auto output = spec["output"].get<std::vector<std::int32_t>>();
  const auto f32 = read_rows<float>(spec["float32"].get<std::string>(), rows * vocab);
  const auto bf = read_rows<nc::bf16>(spec["bfloat16"].get<std::string>(), rows * vocab);
  const auto hf = read_rows<nc::f16>(spec["float16"].get<std::string>(), rows * vocab);
  nc::workspace ws;
  for (const json& c : spec["cases"]) {
    const nc::sampler s(params_of(c["params"]), order_of(c["order"].get<std::string>()));
    const auto r = c["row"].get<std::size_t>();
    float mu = 2.0f * s.params().mirostat_tau;
    const nc::row_request rq{prompt, output, {}, c["position"].get<std::uint64_t>(), &mu, 0};
    std::vector<nc::token_logprob> top(s.top_n());
    const std::string dtype = c["dtype"].get<std::string>();
    nc::row_result res;
    if (dtype == "float32")
      res = s.sample(std::span<const float>(f32).subspan(r * vocab, vocab), ws, rq, top);
    else if (dtype == "bfloat16")
      res = s.sample(std::span<const nc::bf16>(bf).subspan(r * vocab, vocab), ws, rq, top);
    else
      res = s.sample(std::span<const nc::f16>(hf).subspan(r * vocab, vocab), ws, rq, top);
    std::uint32_t bits;
    std::memcpy(&bits, &res.logprob, 4);
    std::printf("%d %08x %d %d", res.token, bits, res.rank, static_cast<int>(res.status));
    for (std::uint32_t i = 0; i < res.top_count; ++i) {
      std::memcpy(&bits, &top[i].logprob, 4);
      std::printf(" %d:%08x", top[i].token, bits);
    }
    std::printf("\n");
  }
  for (const json& c : spec.value("top", json::array())) {
    const std::string dtype = c["dtype"].get<std::string>();
    if (dtype == "float32")
      top_case(f32, vocab, c, ws);
    else if (dtype == "bfloat16")
      top_case(bf, vocab, c, ws);
    else
      top_case(hf, vocab, c, ws);
  }
  if (spec.contains("verify")) {
    const auto q_rows = spec["draft_probs_rows"].get<std::size_t>();
    const auto q = read_rows<float>(spec["draft_probs"].get<std::string>(), q_rows * vocab);
    for (const json& c : spec["verify"]) {
      const std::string dtype = c["dtype"].get<std::string>();
      if (dtype == "float32")
        verify_case(f32, vocab, q, c, prompt, output, ws);
      else if (dtype == "bfloat16")
        verify_case(bf, vocab, q, c, prompt, output, ws);
      else
        verify_case(hf, vocab, q, c, prompt, output, ws);
    }
  }
  return 0;
}
