// nucleus for Python (nanobind): a sampler built from the knob table's keywords, one row or a [B, V]
// batch read in place from any DLPack or buffer producer (float32, bfloat16, float16), the GIL
// released while sampling. The Python layer (python/nucleus/__init__.py) adds per-row parameter arrays.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "nucleus/engine.hpp"
#include "nucleus/engine/knobs.hpp"
#include "nucleus/ops/log_softmax.hpp"
#include "nucleus/version.hpp"

namespace nb = nanobind;
namespace nc = nucleus;

namespace {

using any_array = nb::ndarray<nb::ro, nb::device::cpu>;

[[noreturn]] void type_error(const std::string& what) {
  throw nb::type_error(("nucleus: " + what).c_str());
}
[[noreturn]] void value_error(const std::string& what) {
  throw nb::value_error(("nucleus: " + what).c_str());
}

nc::engine_order order_of(const std::string& name) {
  for (const nc::detail::engine_order_info& e : nc::detail::engine_orders)
    if (name == e.name) return e.order;
  value_error("order must be one of nucleus, vllm, hf, llama_cpp (got '" + name + "')");
}

std::vector<std::int32_t> ids_of(nb::handle v, const std::string& name) {
  std::vector<std::int32_t> out;
  if (!nb::isinstance<nb::sequence>(v) || nb::isinstance<nb::str>(v))
    type_error(name + " must be a sequence of token ids");
  for (nb::handle x : v) {
    if (!nb::isinstance<nb::int_>(x) || nb::isinstance<nb::bool_>(x)) type_error(name + " must hold ints");
    const long long t = nb::cast<long long>(x);
    if (t < 0 || t > INT32_MAX) value_error(name + ": token id " + std::to_string(t) + " out of range");
    out.push_back(static_cast<std::int32_t>(t));
  }
  return out;
}

// One keyword through the knob table: its kind decides the Python type it takes.
void set_knob(nc::sampling_params& p, const std::string& key, nb::handle v) {
  const nc::knob* k = nc::find_knob(key);
  if (!k) type_error("unexpected keyword argument '" + key + "' (the knobs: nucleus.knobs())");
  switch (k->kind) {
    case nc::knob_kind::real:
    case nc::knob_kind::integer: {
      if (nb::isinstance<nb::bool_>(v) ||
          !(nb::isinstance<nb::int_>(v) || (k->kind == nc::knob_kind::real && nb::isinstance<nb::float_>(v))))
        type_error(key + " must be " + (k->kind == nc::knob_kind::real ? "a number" : "an int"));
      // The range is validate()'s (the sampler's own message); here only what a cast could not hold.
      const double x = nb::cast<double>(v);
      if (k->kind == nc::knob_kind::integer && !(x >= INT32_MIN && x <= INT32_MAX))
        value_error("sampling_params." + key + ": " + k->rule);
      k->set(p, x);
      return;
    }
    case nc::knob_kind::token_ids: {
      auto ids = ids_of(v, key);
      if (key == "allowed_token_ids")
        p.allowed_token_ids = std::move(ids);
      else if (key == "banned_token_ids")
        p.banned_token_ids = std::move(ids);
      else
        p.eos_token_ids = std::move(ids);
      return;
    }
    case nc::knob_kind::bias: {
      if (!nb::isinstance<nb::dict>(v)) type_error("logit_bias must be a dict of token id -> bias");
      for (auto [id, b] : nb::borrow<nb::dict>(v)) {
        if (!nb::isinstance<nb::int_>(id) || nb::isinstance<nb::bool_>(id))
          type_error("logit_bias keys must be ints");
        if (!nb::isinstance<nb::int_>(b) && !nb::isinstance<nb::float_>(b))
          type_error("logit_bias values must be numbers");
        const long long t = nb::cast<long long>(id);
        if (t < 0 || t > INT32_MAX)
          value_error("logit_bias: token id " + std::to_string(t) + " out of range");
        p.logit_bias.push_back({static_cast<std::int32_t>(t), nb::cast<float>(b)});
      }
      return;
    }
    case nc::knob_kind::breakers: {
      if (!nb::isinstance<nb::sequence>(v))
        type_error("dry_sequence_breakers must be a list of token-id lists");
      for (nb::handle seq : v) p.dry_sequence_breakers.push_back(ids_of(seq, key));
      return;
    }
    case nc::knob_kind::seed: {
      if (!nb::isinstance<nb::int_>(v) || nb::isinstance<nb::bool_>(v)) type_error("seed must be an int");
      p.seed = nb::cast<std::uint64_t>(v);
      return;
    }
    case nc::knob_kind::logprobs: {
      if (!nb::isinstance<nb::int_>(v) || nb::isinstance<nb::bool_>(v)) type_error("logprobs must be an int");
      p.logprobs = nb::cast<int>(v);
      return;
    }
    case nc::knob_kind::mode: {
      if (!nb::isinstance<nb::str>(v)) type_error("logprobs_mode must be 'raw' or 'processed'");
      const std::string m = nb::cast<std::string>(v);
      if (m == "raw")
        p.logprobs_mode = nc::logprob_mode::raw;
      else if (m == "processed")
        p.logprobs_mode = nc::logprob_mode::processed;
      else
        value_error("sampling_params.logprobs_mode: " + std::string(k->rule));
      return;
    }
  }
}

// A Python Sampler: the C++ sampler and the params it was built from.
struct py_sampler {
  nc::sampler s;
  std::string order;
  py_sampler(const std::string& o, nb::dict kw) : s(build(o, kw)), order(o) {}
  py_sampler(nc::sampling_params p, const std::string& o) : s(std::move(p), order_of(o)), order(o) {}
  static nc::sampler build(const std::string& o, nb::dict kw) {
    nc::sampling_params p;
    for (auto [k, v] : kw) {
      if (!nb::isinstance<nb::str>(k)) type_error("keywords must be strings");
      set_knob(p, nb::cast<std::string>(k), v);
    }
    return nc::sampler(std::move(p), order_of(o));  // std::invalid_argument -> ValueError
  }
};

enum class row_dtype { f32, bf16, f16 };

row_dtype dtype_of(const any_array& a, const char* name, bool bf16_bits) {
  const nb::dlpack::dtype d = a.dtype();
  // numpy has no bfloat16: ml_dtypes' arrays arrive as their uint16 bits (python/nucleus/__init__.py)
  if (bf16_bits && d.lanes == 1 && d.bits == 16 &&
      d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt))
    return row_dtype::bf16;
  if (d.lanes == 1 && d.bits == 32 && d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float))
    return row_dtype::f32;
  if (d.lanes == 1 && d.bits == 16 && d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat))
    return row_dtype::bf16;
  if (d.lanes == 1 && d.bits == 16 && d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float))
    return row_dtype::f16;
  type_error(std::string(name) + " must be float32, bfloat16 or float16 (got code " + std::to_string(d.code) +
             ", " + std::to_string(d.bits) + " bits); nothing is converted");
}

// A [B, V] view of the caller's logits: rows may be strided, a row's elements must be contiguous.
struct matrix_view {
  const void* data;
  std::size_t rows, vocab, stride;
  row_dtype dtype;
};

matrix_view view_of(const any_array& a, bool batch, bool bf16_bits = false) {
  const char* name = "logits";
  const std::size_t nd = a.ndim();
  if (nd != (batch ? 2u : 1u))
    value_error(std::string(name) + " must be " + (batch ? "2-D [B, V]" : "1-D [V]") + " (got " +
                std::to_string(nd) + "-D)");
  const row_dtype dt = dtype_of(a, name, bf16_bits);
  const std::size_t rows = batch ? a.shape(0) : 1;
  const std::size_t vocab = a.shape(nd - 1);
  if (vocab == 0) value_error(std::string(name) + " has no columns");
  if (vocab > 1 && a.stride(nd - 1) != 1)
    value_error(std::string(name) + ": a row's elements must be contiguous (stride " +
                std::to_string(a.stride(nd - 1)) + " along the vocabulary)");
  std::size_t stride = vocab;
  if (batch && rows > 1) {
    if (a.stride(0) < 0 || static_cast<std::size_t>(a.stride(0)) < vocab)
      value_error(std::string(name) + ": rows must not overlap (row stride " + std::to_string(a.stride(0)) +
                  ")");
    stride = static_cast<std::size_t>(a.stride(0));
  }
  return {a.data(), rows, vocab, stride, dt};
}

template <class F>
decltype(auto) with_matrix(const matrix_view& m, F&& f) {
  switch (m.dtype) {
    case row_dtype::bf16:
      return f(nc::logits_matrix<nc::bf16>{static_cast<const nc::bf16*>(m.data), m.rows, m.vocab, m.stride});
    case row_dtype::f16:
      return f(nc::logits_matrix<nc::f16>{static_cast<const nc::f16*>(m.data), m.rows, m.vocab, m.stride});
    case row_dtype::f32:
      break;
  }
  return f(nc::logits_matrix<float>{static_cast<const float*>(m.data), m.rows, m.vocab, m.stride});
}

// One process-wide pool per thread count, made on first use (the batch sampler's executors).
nc::thread_pool& pool(std::size_t threads) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<nc::thread_pool>> pools;
  std::lock_guard lock(mu);
  if (pools.size() < threads) pools.resize(threads);
  if (!pools[threads - 1]) pools[threads - 1] = std::make_unique<nc::thread_pool>(threads);
  return *pools[threads - 1];
}
std::mutex& pool_lock(std::size_t threads) {
  static std::mutex locks[64];
  return locks[(threads - 1) % 64];
}

// Token-id arrays per row from a list of sequences (or None), kept alive for the call.
std::vector<std::vector<std::int32_t>> histories(nb::handle v, std::size_t rows, const char* name) {
  std::vector<std::vector<std::int32_t>> out(rows);
  if (v.is_none()) return out;
  if (!nb::isinstance<nb::sequence>(v) || nb::len(v) != rows)
    value_error(std::string(name) + " must be a list of " + std::to_string(rows) + " token-id sequences");
  std::size_t r = 0;
  for (nb::handle h : v) out[r++] = h.is_none() ? std::vector<std::int32_t>{} : ids_of(h, name);
  return out;
}

template <class T>
std::vector<T> per_row(nb::handle v, std::size_t rows, const char* name, T fallback) {
  std::vector<T> out(rows, fallback);
  if (v.is_none()) return out;
  if (nb::isinstance<nb::int_>(v)) {
    std::fill(out.begin(), out.end(), nb::cast<T>(v));
    return out;
  }
  if (!nb::isinstance<nb::sequence>(v) && !nb::hasattr(v, "__len__"))
    type_error(std::string(name) + " must be ints");
  if (nb::len(v) != rows) value_error(std::string(name) + " must hold " + std::to_string(rows) + " entries");
  std::size_t r = 0;
  for (nb::handle h : v) out[r++] = nb::cast<T>(nb::int_(h));
  return out;
}

template <class T>
nb::ndarray<nb::numpy, T> owned(std::vector<std::size_t> shape) {
  std::size_t n = 1;
  for (std::size_t s : shape) n *= s;
  T* data = new T[n == 0 ? 1 : n]();
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::ndarray<nb::numpy, T>(data, shape.size(), shape.data(), owner);
}

nb::dict sample_batch(any_array logits, nb::list samplers, nb::handle seeds, nb::handle positions,
                      nb::handle streams, nb::handle prompts, nb::handle outputs, std::size_t threads,
                      const std::string& mask, bool bf16_bits) {
  const matrix_view m = view_of(logits, true, bf16_bits);
  const std::size_t B = m.rows;
  if (nb::len(samplers) != B)
    value_error("params must give one Sampler per row (" + std::to_string(nb::len(samplers)) + " for " +
                std::to_string(B) + " rows)");
  if (threads == 0 || threads > 256) value_error("threads must be in [1, 256]");
  if (mask != "none" && mask != "bool" && mask != "bits") value_error("mask must be None, 'bool' or 'bits'");
  const auto seed_v = per_row<std::uint64_t>(seeds, B, "seeds", 0);
  const bool have_seeds = !seeds.is_none();
  const auto pos_v = per_row<std::uint64_t>(positions, B, "positions", 0);
  const auto stream_v = per_row<std::uint64_t>(streams, B, "streams", 0);
  const auto prompt_v = histories(prompts, B, "prompts");
  const auto output_v = histories(outputs, B, "outputs");
  // Each row's sampler; a row whose seed differs from its Sampler's gets a copy with that seed.
  std::vector<const nc::sampler*> sp(B);
  std::vector<std::optional<nc::sampler>> reseeded(B);
  std::size_t top_n = 0;
  for (std::size_t r = 0; r < B; ++r) {
    nb::handle h = samplers[r];
    if (!nb::isinstance<py_sampler>(h))
      type_error("params[" + std::to_string(r) + "] is not a nucleus Sampler");
    const nc::sampler& s = nb::cast<const py_sampler&>(h).s;
    sp[r] = &s;
    if (have_seeds && seed_v[r] != s.params().seed) {
      nc::sampling_params p = s.params();
      p.seed = seed_v[r];
      reseeded[r].emplace(std::move(p), s.order());
      sp[r] = &*reseeded[r];
    }
    top_n = std::max(top_n, sp[r]->top_n());
  }
  std::vector<nc::batch_row> rows(B);
  std::vector<float> mu(B);
  for (std::size_t r = 0; r < B; ++r) {
    mu[r] = 2.0f * sp[r]->params().mirostat_tau;
    rows[r] = {sp[r], {prompt_v[r], output_v[r], {}, pos_v[r], &mu[r], stream_v[r]}};
  }
  auto tokens = owned<std::int32_t>({B});
  auto logprobs = owned<float>({B});
  auto ranks = owned<std::int32_t>({B});
  auto status = owned<std::uint8_t>({B});
  auto top_ids = owned<std::int32_t>({B, top_n});
  auto top_lps = owned<float>({B, top_n});
  std::vector<nc::row_result> out(B);
  std::vector<nc::token_logprob> top(B * top_n);
  std::optional<nb::ndarray<nb::numpy, bool>> mask_bool;
  std::optional<nb::ndarray<nb::numpy, std::uint32_t>> mask_bits;
  const std::size_t words = (m.vocab + 31) / 32;
  if (mask == "bool") mask_bool = owned<bool>({B, m.vocab});
  if (mask == "bits") mask_bits = owned<std::uint32_t>({B, words});
  {
    nb::gil_scoped_release release;
    thread_local nc::batch_sampler batch;
    with_matrix(m, [&](const auto& lm) {
      if (threads == 1) {
        batch.sample(lm, rows, out, nc::inline_executor{}, top, top_n);
      } else {
        std::lock_guard lock(pool_lock(threads));
        batch.sample(lm, rows, out, pool(threads), top, top_n);
      }
      // The kept set: the processed distribution each row drew from (the same chain, run again).
      if (mask != "none") {
        thread_local nc::workspace ws;
        for (std::size_t r = 0; r < B; ++r) {
          float mu_r = 2.0f * sp[r]->params().mirostat_tau;
          nc::row_request rq = rows[r].request;
          rq.mirostat_mu = &mu_r;
          const nc::distribution d = sp[r]->process(lm.row(r), ws, rq);
          for (std::size_t i = 0; i < d.size(); ++i) {
            const std::size_t id = d.ids().data() ? static_cast<std::size_t>(d.ids()[i]) : i;
            if (d.probs()[i] <= 0.0f) continue;
            if (mask_bool) mask_bool->data()[r * m.vocab + id] = true;
            if (mask_bits) mask_bits->data()[r * words + id / 32] |= 1u << (id % 32);
          }
        }
      }
    });
  }
  for (std::size_t r = 0; r < B; ++r) {
    tokens.data()[r] = out[r].token;
    logprobs.data()[r] = out[r].logprob;
    ranks.data()[r] = out[r].rank;
    status.data()[r] = static_cast<std::uint8_t>(out[r].status);
    for (std::size_t i = 0; i < top_n; ++i) {
      const bool have = i < out[r].top_count;
      top_ids.data()[r * top_n + i] = have ? top[r * top_n + i].token : -1;
      top_lps.data()[r * top_n + i] =
          have ? top[r * top_n + i].logprob : -std::numeric_limits<float>::infinity();
    }
  }
  nb::dict d;
  d["tokens"] = tokens;
  d["logprobs"] = logprobs;
  d["ranks"] = ranks;
  d["status"] = status;
  d["top_ids"] = top_ids;
  d["top_logprobs"] = top_lps;
  if (mask_bool) d["mask"] = *mask_bool;
  if (mask_bits) d["mask"] = *mask_bits;
  return d;
}

nb::ndarray<nb::numpy, float> log_softmax(any_array logits, bool bf16_bits) {
  const bool batch = logits.ndim() == 2;
  const matrix_view m = view_of(logits, batch, bf16_bits);
  std::vector<std::size_t> shape =
      batch ? std::vector<std::size_t>{m.rows, m.vocab} : std::vector<std::size_t>{m.vocab};
  auto out = owned<float>(shape);
  {
    nb::gil_scoped_release release;
    with_matrix(m, [&](const auto& lm) {
      for (std::size_t r = 0; r < m.rows; ++r)
        nc::log_softmax(lm.row(r), std::span<float>(out.data() + r * m.vocab, m.vocab));
    });
  }
  return out;
}

nb::list knob_table() {
  nb::list out;
  const nc::sampling_params defaults;
  for (const nc::knob& k : nc::knobs) {
    nb::dict d;
    d["name"] = k.name;
    static const char* kinds[] = {"real",     "integer", "token_ids", "bias",
                                  "breakers", "seed",    "logprobs",  "mode"};
    d["kind"] = kinds[static_cast<int>(k.kind)];
    if (k.number()) {
      if (k.kind == nc::knob_kind::real)
        d["default"] = k.get(defaults);
      else
        d["default"] = static_cast<long long>(k.get(defaults));
    } else {
      d["default"] = nb::none();
    }
    d["rule"] = k.rule;
    d["lo"] = k.lo;
    d["hi"] = k.hi;
    d["lo_open"] = k.lo_open;
    d["hi_open"] = k.hi_open;
    nb::list orders;
    for (const nc::detail::engine_order_info& e : nc::detail::engine_orders)
      if (k.in_order(e.order)) orders.append(e.name);
    d["orders"] = orders;
    d["modifies"] = k.modifies ? nb::object(nb::str(k.modifies)) : nb::object(nb::none());
    out.append(d);
  }
  return out;
}

}  // namespace

NB_MODULE(_nucleus, m) {
  m.doc() = "nucleus: exact, seeded next-token sampling over 248k-token rows";
  m.attr("__version__") = std::to_string(NUCLEUS_VERSION_MAJOR) + "." +
                          std::to_string(NUCLEUS_VERSION_MINOR) + "." + std::to_string(NUCLEUS_VERSION_PATCH);
  m.def("knobs", &knob_table,
        "The knob table: every keyword a Sampler takes, its default, rule and engine orders.");

  nb::class_<py_sampler>(m, "Sampler")
      .def(nb::init<const std::string&, nb::dict>(), nb::arg("order"), nb::arg("params"))
      .def_prop_ro("order", [](const py_sampler& s) { return s.order; })
      .def_prop_ro("seed", [](const py_sampler& s) { return s.s.params().seed; })
      .def_prop_ro("top_n", [](const py_sampler& s) { return s.s.top_n(); })
      .def("params", [](const py_sampler& s) {
        nb::dict d;
        const nc::sampling_params& p = s.s.params();
        for (const nc::knob& k : nc::knobs)
          if (k.number()) {
            if (k.kind == nc::knob_kind::real)
              d[k.name] = k.get(p);
            else
              d[k.name] = static_cast<long long>(k.get(p));
          }
        d["seed"] = p.seed;
        d["logprobs"] = p.logprobs;
        d["logprobs_mode"] = p.logprobs_mode == nc::logprob_mode::raw ? "raw" : "processed";
        return d;
      });

  m.def("_sample_batch", &sample_batch, nb::arg("logits"), nb::arg("samplers"), nb::arg("seeds").none(),
        nb::arg("positions").none(), nb::arg("streams").none(), nb::arg("prompts").none(),
        nb::arg("outputs").none(), nb::arg("threads"), nb::arg("mask"), nb::arg("bf16_bits"));
  // The address the sampler reads a [B, V] array's first row from (the zero-copy test).
  m.def("_row_address", [](any_array logits, bool bf16_bits) {
    return reinterpret_cast<std::uintptr_t>(view_of(logits, true, bf16_bits).data);
  });
  m.def("_log_softmax", &log_softmax, nb::arg("logits"), nb::arg("bf16_bits"));
}
