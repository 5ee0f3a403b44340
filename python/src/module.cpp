// nucleus for Python (nanobind): a sampler built from the knob table's keywords, one row or a [B, V]
// batch read in place from any DLPack or buffer producer (float32, bfloat16, float16), the GIL
// released while sampling. The Python layer (python/nucleus/__init__.py) adds per-row parameter arrays.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
// Result arrays come from numpy's C API: exporting an nb::ndarray goes through the buffer protocol and
// numpy.asarray, about 0.7 us per array, six of them per sample_batch call (docs/python.md, "Overhead").
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "nucleus/engine.hpp"
#include "nucleus/engine/knobs.hpp"
#include "nucleus/ops/log_softmax.hpp"
#include "nucleus/ops/logprobs_of.hpp"
#include "nucleus/ops/top_logprobs.hpp"
#include "nucleus/sharded/split.hpp"
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

// One integer of a draw key (a seed, position or stream): a Python int or a numpy / torch integer in
// [0, 2^64). A bool or a float is refused, not truncated.
std::uint64_t key_int(nb::handle h, const std::string& name) {
  PyObject* o = h.ptr();
  if (PyBool_Check(o) || PyFloat_Check(o) || !PyIndex_Check(o) || PyArray_IsScalar(o, Bool))
    type_error(name + " must be an int (got " + Py_TYPE(o)->tp_name + ")");
  nb::object i = nb::steal(PyNumber_Index(o));
  if (!i.is_valid()) {
    PyErr_Clear();
    type_error(name + " must be an int (got " + Py_TYPE(o)->tp_name + ")");
  }
  const unsigned long long v = PyLong_AsUnsignedLongLong(i.ptr());
  if (v == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    value_error(name + ": " + nb::cast<std::string>(nb::str(i)) + " is outside [0, 2^64)");
  }
  return v;
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
      p.seed = key_int(v, "seed");
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

// A DLPack dtype as numpy spells it (float64, bool, uint16, bfloat16), for error messages.
std::string dtype_name(const nb::dlpack::dtype& d) {
  using code = nb::dlpack::dtype_code;
  static const std::pair<code, const char*> names[] = {{code::Int, "int"},         {code::UInt, "uint"},
                                                       {code::Float, "float"},     {code::Bfloat, "bfloat"},
                                                       {code::Complex, "complex"}, {code::Bool, "bool"}};
  std::string base = "code " + std::to_string(d.code) + " ";
  for (const auto& [c, n] : names)
    if (d.code == static_cast<std::uint8_t>(c)) base = n;
  std::string out = d.code == static_cast<std::uint8_t>(code::Bool) ? base : base + std::to_string(d.bits);
  return d.lanes == 1 ? out : out + "x" + std::to_string(d.lanes);
}

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
  type_error(std::string(name) + " must be float32, bfloat16 or float16 (got " + dtype_name(d) +
             "); nothing is converted");
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

// An integer array's entry at p, into x when its type is signed, else into u.
template <class S, class U>
void read_key(const char* p, bool is_int, std::int64_t& x, std::uint64_t& u) {
  if (is_int) {
    S v;
    std::memcpy(&v, p, sizeof v);
    x = v;
  } else {
    U v;
    std::memcpy(&v, p, sizeof v);
    u = v;
  }
}

// A per-row draw-key field (seeds, positions, streams): None (the fallback), one int for every row, a
// 1-D integer array of B entries (numpy, torch: read in place, any stride), or a sequence of B ints.
std::vector<std::uint64_t> per_row(nb::handle v, std::size_t rows, const char* name, std::uint64_t fallback) {
  std::vector<std::uint64_t> out(rows, fallback);
  if (v.is_none()) return out;
  const std::string field(name);
  if (PyLong_Check(v.ptr()) && !PyBool_Check(v.ptr())) {
    std::fill(out.begin(), out.end(), key_int(v, field));
    return out;
  }
  any_array a;
  if (nb::try_cast(v, a)) {
    if (a.ndim() > 1) value_error(field + " must be 1-D (got " + std::to_string(a.ndim()) + "-D)");
    if (a.ndim() == 0) {
      std::fill(out.begin(), out.end(), key_int(v, field));
      return out;
    }
    const nb::dlpack::dtype d = a.dtype();
    const bool is_int = d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int);
    const bool is_uint = d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt);
    if (d.lanes != 1 || !(is_int || is_uint) || (d.bits != 8 && d.bits != 16 && d.bits != 32 && d.bits != 64))
      type_error(field + " must hold integers (got " + dtype_name(d) + ")");
    if (a.shape(0) != rows) value_error(field + " must hold " + std::to_string(rows) + " entries");
    const auto* base = static_cast<const char*>(a.data());
    const std::ptrdiff_t step = static_cast<std::ptrdiff_t>(a.stride(0)) * (d.bits / 8);
    for (std::size_t r = 0; r < rows; ++r) {
      const char* p = base + static_cast<std::ptrdiff_t>(r) * step;
      std::int64_t x = 0;
      std::uint64_t u = 0;
      switch (d.bits) {
        case 8:
          read_key<std::int8_t, std::uint8_t>(p, is_int, x, u);
          break;
        case 16:
          read_key<std::int16_t, std::uint16_t>(p, is_int, x, u);
          break;
        case 32:
          read_key<std::int32_t, std::uint32_t>(p, is_int, x, u);
          break;
        default:
          read_key<std::int64_t, std::uint64_t>(p, is_int, x, u);
          break;
      }
      if (is_int && x < 0)
        value_error(field + "[" + std::to_string(r) + "]: " + std::to_string(x) + " is outside [0, 2^64)");
      out[r] = is_int ? static_cast<std::uint64_t>(x) : u;
    }
    return out;
  }
  if (nb::isinstance<nb::str>(v) || nb::isinstance<nb::bytes>(v))
    type_error(field + " must be an int, an integer array or a sequence of ints");
  if (!nb::isinstance<nb::sequence>(v)) {  // one value for every row: an int, else refused naming its type
    std::fill(out.begin(), out.end(), key_int(v, field));
    return out;
  }
  if (nb::len(v) != rows) value_error(field + " must hold " + std::to_string(rows) + " entries");
  std::size_t r = 0;
  for (nb::handle h : v) {
    out[r] = key_int(h, field + "[" + std::to_string(r) + "]");
    ++r;
  }
  return out;
}

// A new zero-filled numpy array of T, made by numpy itself (PyArray_ZEROS); data() is where the call
// writes its results, with the GIL held or released, before the array is returned.
template <class T>
struct np_array : nb::object {
  explicit np_array(nb::object o) : nb::object(std::move(o)) {}
  T* data() const { return static_cast<T*>(PyArray_DATA(reinterpret_cast<PyArrayObject*>(ptr()))); }
};

template <class T>
constexpr int np_type() {
  if constexpr (std::is_same_v<T, bool>) return NPY_BOOL;
  if constexpr (std::is_same_v<T, std::uint8_t>) return NPY_UINT8;
  if constexpr (std::is_same_v<T, std::int32_t>) return NPY_INT32;
  if constexpr (std::is_same_v<T, std::uint32_t>) return NPY_UINT32;
  if constexpr (std::is_same_v<T, float>) return NPY_FLOAT32;
}

template <class T>
np_array<T> owned(const std::vector<std::size_t>& shape) {
  npy_intp dims[2];
  if (shape.size() > 2) value_error("internal: result arrays have at most 2 dimensions");
  for (std::size_t i = 0; i < shape.size(); ++i) dims[i] = static_cast<npy_intp>(shape[i]);
  PyObject* a = PyArray_ZEROS(static_cast<int>(shape.size()), dims, np_type<T>(), 0);
  if (!a) throw nb::python_error();
  return np_array<T>(nb::steal(a));
}

// Each row's sampler and request, as sample_batch builds them: with seeds=, each row's request
// carries its seed (row_request::seed, in place of its Sampler's); mirostat's mu starts at 2 tau (a
// call carries no state).
struct request_rows {
  std::vector<const nc::sampler*> sp;
  std::vector<std::optional<std::uint64_t>> seed;
  std::vector<std::uint64_t> pos, stream;
  std::vector<std::vector<std::int32_t>> prompt, output;
  std::vector<float> mu;
  std::vector<std::span<const std::uint32_t>> bitmask;  // empty spans: no mask
  std::optional<any_array> bitmask_owner;

  request_rows(nb::handle samplers, std::size_t B, nb::handle seeds, nb::handle positions, nb::handle streams,
               nb::handle prompts, nb::handle outputs, const char* params_name = "params")
      : sp(B),
        seed(B),
        pos(per_row(positions, B, "positions", 0)),
        stream(per_row(streams, B, "streams", 0)),
        prompt(histories(prompts, B, "prompts")),
        output(histories(outputs, B, "outputs")),
        mu(B),
        bitmask(B) {
    if (!nb::isinstance<nb::sequence>(samplers) || nb::len(samplers) != B)
      value_error(std::string(params_name) + " must give one Sampler per row (" +
                  std::to_string(nb::len(samplers)) + " for " + std::to_string(B) + " rows)");
    const auto seed_v = per_row(seeds, B, "seeds", 0);
    for (std::size_t r = 0; r < B; ++r) {
      // a nucleus.Sampler (python/nucleus/__init__.py) holds its C++ sampler as _s; the caller's list
      // keeps both alive for the call
      nb::object h = samplers[r];
      if (!nb::isinstance<py_sampler>(h)) h = nb::getattr(h, "_s", nb::none());
      if (!nb::isinstance<py_sampler>(h))
        type_error(std::string(params_name) + "[" + std::to_string(r) + "] is not a nucleus.Sampler");
      sp[r] = &nb::cast<const py_sampler&>(h).s;
      if (!seeds.is_none()) seed[r] = seed_v[r];
      mu[r] = nc::mirostat_initial_mu(sp[r]->params().mirostat_tau);
    }
  }
  // Each row's allowed tokens: None, or int32 / uint32 [B, W] packed words (bit i of word w allows
  // token 32 w + i; xgrammar's layout), W >= ceil(V / 32), rows strided, a row's words contiguous.
  void set_bitmasks(nb::handle v, std::size_t vocab) {
    if (v.is_none()) return;
    any_array a;
    if (!nb::try_cast(v, a)) type_error("bitmasks must be an int32 or uint32 [B, ceil(V / 32)] array");
    const nb::dlpack::dtype d = a.dtype();
    const bool words = d.lanes == 1 && d.bits == 32 &&
                       (d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int) ||
                        d.code == static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt));
    if (!words) type_error("bitmasks must hold int32 or uint32 words (bit i of word w = token 32 w + i)");
    const std::size_t B = bitmask.size(), need = (vocab + 31) / 32;
    if (a.ndim() != 2 || a.shape(0) != B || a.shape(1) < need)
      value_error("bitmasks must be [" + std::to_string(B) + ", " + std::to_string(need) +
                  "] (B rows of ceil(V / 32) words)");
    if (need > 1 && a.stride(1) != 1) value_error("bitmasks: a row's words must be contiguous");
    if (B > 1 && a.stride(0) < static_cast<std::int64_t>(need))
      value_error("bitmasks: rows must not overlap");
    const auto* base = static_cast<const std::uint32_t*>(a.data());
    for (std::size_t r = 0; r < B; ++r) bitmask[r] = {base + r * static_cast<std::size_t>(a.stride(0)), need};
    bitmask_owner = a;
  }
  nc::row_request request(std::size_t r) {
    return {prompt[r], output[r], bitmask[r], pos[r], &mu[r], stream[r], seed[r]};
  }
};

std::size_t checked_threads(std::size_t threads) {
  if (threads == 0 || threads > 256) value_error("threads must be in [1, 256]");
  return threads;
}

// Runs f(row, slot) for every row, on the calling thread or the shared pool of that many threads.
template <class F>
void for_rows(std::size_t rows, std::size_t threads, F&& f) {
  if (threads == 1) {
    nc::inline_executor{}.bulk(rows, f);
  } else {
    std::lock_guard lock(pool_lock(threads));
    pool(threads).bulk(rows, f);
  }
}

// The caller's kept-set output ("bool": [B, V], "bits": [B, ceil(V / 32)] uint32), or nothing.
struct kept_mask {
  std::optional<np_array<bool>> as_bool;
  std::optional<np_array<std::uint32_t>> as_bits;
  std::size_t vocab, words;

  kept_mask(const std::string& kind, std::size_t rows, std::size_t v) : vocab(v), words((v + 31) / 32) {
    if (kind != "none" && kind != "bool" && kind != "bits")
      value_error("mask must be None, 'bool' or 'bits'");
    if (kind == "bool") as_bool.emplace(owned<bool>({rows, vocab}));
    if (kind == "bits") as_bits.emplace(owned<std::uint32_t>({rows, words}));
  }
  bool wanted() const { return as_bool || as_bits; }
  // The tokens of a processed distribution with a positive probability: what the draw could pick.
  void mark(std::size_t r, const nc::distribution& d) {
    for (std::size_t i = 0; i < d.size(); ++i) {
      if (d.probs()[i] <= 0.0f) continue;
      const std::size_t id = static_cast<std::size_t>(d.ids()[i]);
      if (as_bool) as_bool->data()[r * vocab + id] = true;
      if (as_bits) as_bits->data()[r * words + id / 32] |= 1u << (id % 32);
    }
  }
  void put(nb::dict& d) const {
    if (as_bool) d["mask"] = *as_bool;
    if (as_bits) d["mask"] = *as_bits;
  }
};

// Thread-local workspaces, one per pool slot, for the row loops here.
std::vector<nc::workspace>& spaces(std::size_t slots) {
  thread_local std::vector<nc::workspace> ws;
  if (ws.size() < slots) ws.resize(slots);
  return ws;
}

// The caller's token output (sample_batch's out=): an int32 or int64 [B] array, written after the
// draw; everything about it is checked before anything is sampled.
struct token_out {
  std::optional<nb::ndarray<nb::device::cpu>> a;
  nb::handle owner;
  token_out(nb::handle v, std::size_t B) : owner(v) {
    if (v.is_none()) return;
    nb::ndarray<nb::device::cpu> x;
    if (!nb::try_cast(v, x)) type_error("out must be a writable int32 or int64 [B] array");
    const nb::dlpack::dtype d = x.dtype();
    if (d.lanes != 1 || (d.bits != 32 && d.bits != 64) ||
        d.code != static_cast<std::uint8_t>(nb::dlpack::dtype_code::Int))
      type_error("out must hold int32 or int64 (got " + dtype_name(d) + ")");
    if (x.ndim() != 1 || x.shape(0) != B) value_error("out must be [" + std::to_string(B) + "]");
    if (B > 1 && x.stride(0) == 0) value_error("out: its entries must not overlap (stride 0)");
    a = x;
  }
  void put(std::size_t r, std::int32_t token) {
    // signed: a reversed view (out[::-1]) has a negative stride
    char* p = static_cast<char*>(a->data()) + static_cast<std::ptrdiff_t>(r) * a->stride(0) *
                                                  static_cast<std::ptrdiff_t>(a->dtype().bits / 8);
    if (a->dtype().bits == 32)
      std::memcpy(p, &token, 4);
    else {
      const std::int64_t t = token;
      std::memcpy(p, &t, 8);
    }
  }
};

nb::dict sample_batch(any_array logits, nb::handle samplers, nb::handle seeds, nb::handle positions,
                      nb::handle streams, nb::handle prompts, nb::handle outputs, nb::handle bitmasks,
                      nb::handle out_tokens, std::size_t threads, const std::string& mask, bool bf16_bits) {
  const matrix_view m = view_of(logits, true, bf16_bits);
  const std::size_t B = m.rows;
  checked_threads(threads);
  kept_mask kept(mask, B, m.vocab);
  request_rows rq(samplers, B, seeds, positions, streams, prompts, outputs);
  rq.set_bitmasks(bitmasks, m.vocab);
  token_out tok_out(out_tokens, B);
  std::size_t top_n = 0;
  std::vector<nc::batch_row> rows(B);
  for (std::size_t r = 0; r < B; ++r) {
    top_n = std::max(top_n, rq.sp[r]->top_n());
    rows[r] = {rq.sp[r], rq.request(r)};
  }
  auto tokens = owned<std::int32_t>({B});
  auto logprobs = owned<float>({B});
  auto ranks = owned<std::int32_t>({B});
  auto status = owned<std::uint8_t>({B});
  auto top_ids = owned<std::int32_t>({B, top_n});
  auto top_lps = owned<float>({B, top_n});
  std::vector<nc::row_result> out(B);
  std::vector<nc::token_logprob> top(B * top_n);
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
      if (kept.wanted()) {
        nc::workspace& ws = spaces(1)[0];
        for (std::size_t r = 0; r < B; ++r) {
          nc::row_request q = rq.request(r);
          float mu_r = nc::mirostat_initial_mu(rq.sp[r]->params().mirostat_tau);
          q.mirostat_mu = &mu_r;
          kept.mark(r, rq.sp[r]->process(lm.row(r), ws, q));
        }
      }
    });
  }
  for (std::size_t r = 0; r < B; ++r) {
    tokens.data()[r] = out[r].token;
    if (tok_out.a) tok_out.put(r, out[r].token);
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
  if (tok_out.a)
    d["tokens"] = tok_out.owner;
  else
    d["tokens"] = tokens;
  d["logprobs"] = logprobs;
  d["ranks"] = ranks;
  d["status"] = status;
  d["top_ids"] = top_ids;
  d["top_logprobs"] = top_lps;
  kept.put(d);
  return d;
}

// --- replay: given tokens' logprobs in the distribution a row's draw used -----------------------

// The replay: nc::sampler::processed_logprobs_of, and the kept set of the distribution it read.
template <class T>
void replay_processed(const nc::sampler& s, std::span<const T> row, nc::workspace& ws,
                      const nc::row_request& rq, std::span<const std::int32_t> tokens, std::span<float> out,
                      kept_mask& kept, std::size_t r) {
  const nc::distribution d = s.processed_logprobs_of(row, ws, rq, tokens, out);
  if (d.status() == nc::status::ok && kept.wanted()) kept.mark(r, d);
}

using token_array = nb::ndarray<const std::int32_t, nb::c_contig, nb::device::cpu>;

nb::dict replay_logprobs(any_array logits, token_array tokens, nb::handle samplers, nb::handle seeds,
                         nb::handle positions, nb::handle streams, nb::handle prompts, nb::handle outputs,
                         nb::handle bitmasks, const std::string& mode, const std::string& mask,
                         std::size_t threads, bool bf16_bits) {
  const matrix_view m = view_of(logits, true, bf16_bits);
  const std::size_t B = m.rows;
  if (mode != "raw" && mode != "processed")
    value_error("mode must be 'raw' or 'processed' (got '" + mode + "')");
  checked_threads(threads);
  if (tokens.ndim() < 1 || tokens.ndim() > 2 || tokens.shape(0) != B)
    value_error("tokens must be [B] or [B, K] with B = " + std::to_string(B));
  const std::size_t K = tokens.ndim() == 2 ? tokens.shape(1) : 1;
  for (std::size_t i = 0; i < B * K; ++i)
    if (tokens.data()[i] < 0 || static_cast<std::size_t>(tokens.data()[i]) >= m.vocab)
      value_error("tokens: token id " + std::to_string(tokens.data()[i]) + " is outside [0, " +
                  std::to_string(m.vocab) + ")");
  kept_mask kept(mask, B, m.vocab);
  request_rows rq(samplers, B, seeds, positions, streams, prompts, outputs);
  rq.set_bitmasks(bitmasks, m.vocab);
  std::vector<std::size_t> shape{B};
  if (tokens.ndim() == 2) shape.push_back(K);
  auto out = owned<float>(shape);
  {
    nb::gil_scoped_release release;
    std::vector<nc::workspace>& ws = spaces(threads);
    with_matrix(m, [&](const auto& lm) {
      for_rows(B, threads, [&](std::size_t r, std::size_t slot) {
        const std::span<const std::int32_t> t(tokens.data() + r * K, K);
        const std::span<float> o(out.data() + r * K, K);
        const auto row = lm.row(r);
        if (mode == "processed") {
          replay_processed(*rq.sp[r], row, ws[slot], rq.request(r), t, o, kept, r);
          return;
        }
        nc::logprobs_of(row, t, o);  // the raw log_softmax: sample()'s raw mode, whatever the chain cut
        if (kept.wanted())
          replay_processed(*rq.sp[r], row, ws[slot], rq.request(r), std::span<const std::int32_t>{},
                           std::span<float>{}, kept, r);
      });
    });
  }
  nb::dict d;
  d["logprobs"] = out;
  kept.put(d);
  return d;
}

// --- the raw top-n (ops/top_logprobs.hpp) -------------------------------------------------------

nb::dict top_logprobs(any_array logits, long long n, bool bf16_bits) {
  const bool batch = logits.ndim() == 2;
  const matrix_view m = view_of(logits, batch, bf16_bits);
  if (n < 0) value_error("n must be >= 0 (got " + std::to_string(n) + ")");
  const std::size_t k = std::min(static_cast<std::size_t>(n), m.vocab);
  std::vector<std::size_t> shape = batch ? std::vector<std::size_t>{m.rows, k} : std::vector<std::size_t>{k};
  auto ids = owned<std::int32_t>(shape);
  auto lps = owned<float>(shape);
  {
    nb::gil_scoped_release release;
    nc::workspace& ws = spaces(1)[0];
    with_matrix(m, [&](const auto& lm) {
      for (std::size_t r = 0; r < m.rows; ++r) {
        const auto top = nc::top_logprobs(lm.row(r), k, ws);
        for (std::size_t i = 0; i < k; ++i) {
          const bool have = i < top.size();
          ids.data()[r * k + i] = have ? top[i].token : -1;
          lps.data()[r * k + i] = have ? top[i].logprob : -std::numeric_limits<float>::infinity();
        }
      }
    });
  }
  nb::dict d;
  d["ids"] = ids;
  d["logprobs"] = lps;
  return d;
}

// --- speculative verification (engine/speculative.hpp through batch_sampler's verify rows) -----

using probs_array = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;

nb::dict verify_drafts(any_array target, nb::handle samplers, nb::list drafts, nb::handle draft_probs,
                       nb::handle seeds, nb::handle positions, nb::handle streams, nb::handle prompts,
                       nb::handle outputs, std::size_t threads, bool bf16_bits) {
  const matrix_view m = view_of(target, true, bf16_bits);
  checked_threads(threads);
  const std::size_t B = nb::len(drafts);
  std::vector<std::vector<std::int32_t>> draft(B);
  std::size_t rows_needed = 0, kmax = 0;
  for (std::size_t r = 0; r < B; ++r) {
    draft[r] = ids_of(drafts[r], "drafts[" + std::to_string(r) + "]");
    rows_needed += draft[r].size() + 1;
    kmax = std::max(kmax, draft[r].size());
  }
  if (rows_needed != m.rows)
    value_error("target must hold sum(len(draft) + 1) = " + std::to_string(rows_needed) + " rows (got " +
                std::to_string(m.rows) + ")");
  std::vector<std::optional<probs_array>> q(B);
  if (!draft_probs.is_none()) {
    if (!nb::isinstance<nb::sequence>(draft_probs) || nb::len(draft_probs) != B)
      value_error("draft_probs must be None or hold one entry per draft");
    for (std::size_t r = 0; r < B; ++r) {
      nb::handle h = draft_probs[r];
      if (h.is_none()) continue;
      if (!nb::try_cast(h, q[r].emplace()))
        type_error("draft_probs[" + std::to_string(r) + "] must be a C-contiguous float32 array");
      if (q[r]->ndim() != 2 || q[r]->shape(0) != draft[r].size() || q[r]->shape(1) != m.vocab)
        value_error("draft_probs[" + std::to_string(r) + "] must be [" + std::to_string(draft[r].size()) +
                    ", " + std::to_string(m.vocab) + "]");
    }
  }
  request_rows rq(samplers, B, seeds, positions, streams, prompts, outputs);
  std::size_t top_n = 0;
  for (std::size_t r = 0; r < B; ++r) top_n = std::max(top_n, rq.sp[r]->top_n());
  const std::size_t width = kmax + 1;
  std::vector<nc::row_result> out(B * width);
  std::vector<nc::token_logprob> top(B * top_n);
  std::vector<nc::verify_result> res(B);
  {
    nb::gil_scoped_release release;
    thread_local nc::batch_sampler batch;
    with_matrix(m, [&](const auto& lm) {
      using T = std::remove_cvref_t<decltype(*lm.data)>;
      std::vector<nc::verify_row<T>> rows(B);
      std::size_t first = 0;
      for (std::size_t r = 0; r < B; ++r) {
        const std::size_t k = draft[r].size();
        const nc::logits_matrix<T> t{lm.data + first * lm.stride, k + 1, lm.vocab, lm.stride};
        const std::span<const float> p =
            q[r] ? std::span<const float>(q[r]->data(), k * m.vocab) : std::span<const float>{};
        rows[r] = {rq.sp[r],
                   rq.request(r),
                   t,
                   draft[r],
                   p,
                   std::span<nc::row_result>(out).subspan(r * width, k + 1),
                   std::span<nc::token_logprob>(top).subspan(r * top_n, rq.sp[r]->top_n())};
        first += k + 1;
      }
      if (threads == 1) {
        batch.sample(std::span<const nc::verify_row<T>>(rows), std::span<nc::verify_result>(res));
      } else {
        std::lock_guard lock(pool_lock(threads));
        batch.sample(std::span<const nc::verify_row<T>>(rows), std::span<nc::verify_result>(res),
                     pool(threads));
      }
    });
  }
  auto accepted = owned<std::int32_t>({B});
  auto emitted = owned<std::int32_t>({B});
  auto status = owned<std::uint8_t>({B});
  auto tokens = owned<std::int32_t>({B, width});
  auto logprobs = owned<float>({B, width});
  auto top_ids = owned<std::int32_t>({B, top_n});
  auto top_lps = owned<float>({B, top_n});
  for (std::size_t r = 0; r < B; ++r) {
    accepted.data()[r] = static_cast<std::int32_t>(res[r].accepted);
    emitted.data()[r] = static_cast<std::int32_t>(res[r].emitted);
    status.data()[r] = static_cast<std::uint8_t>(res[r].status);
    for (std::size_t i = 0; i < width; ++i) {
      const bool have = i < res[r].emitted;
      tokens.data()[r * width + i] = have ? out[r * width + i].token : -1;
      logprobs.data()[r * width + i] =
          have ? out[r * width + i].logprob : -std::numeric_limits<float>::infinity();
    }
    // The bonus draw's top-n, when every draft token stood (out[k] is then sample()'s result).
    const std::size_t k = draft[r].size();
    const std::uint32_t shown =
        res[r].accepted == k && res[r].emitted == k + 1 ? out[r * width + k].top_count : 0;
    for (std::size_t i = 0; i < top_n; ++i) {
      const bool have = i < shown;
      top_ids.data()[r * top_n + i] = have ? top[r * top_n + i].token : -1;
      top_lps.data()[r * top_n + i] =
          have ? top[r * top_n + i].logprob : -std::numeric_limits<float>::infinity();
    }
  }
  nb::dict d;
  d["accepted"] = accepted;
  d["emitted"] = emitted;
  d["status"] = status;
  d["tokens"] = tokens;
  d["logprobs"] = logprobs;
  d["top_ids"] = top_ids;
  d["top_logprobs"] = top_lps;
  return d;
}

// --- one row split across threads (sharded/split.hpp) --------------------------------------------

nb::dict sample_split(any_array logits, nb::handle samplers, nb::handle seeds, nb::handle positions,
                      nb::handle streams, nb::handle prompts, nb::handle outputs, nb::handle bitmasks,
                      std::size_t threads, bool bf16_bits) {
  const matrix_view m = view_of(logits, false, bf16_bits);
  checked_threads(threads);
  request_rows rq(samplers, 1, seeds, positions, streams, prompts, outputs);
  rq.set_bitmasks(bitmasks, m.vocab);
  const nc::sampler& s = *rq.sp[0];
  std::vector<nc::token_logprob> top(s.top_n());
  nc::row_result res;
  nc::shard_sampler::path route;
  {
    nb::gil_scoped_release release;
    with_matrix(m, [&](const auto& lm) {
      std::lock_guard lock(pool_lock(threads));
      nc::split_sampler split(s, threads);  // the shards' workspaces are per call: slices, not rows
      res = split.sample(lm.row(0), rq.request(0), std::span<nc::token_logprob>(top), pool(threads));
      route = split.route();
    });
  }
  static const char* routes[] = {"gather", "greedy", "top_k", "top_p", "dense"};
  auto top_ids = owned<std::int32_t>({top.size()});
  auto top_lps = owned<float>({top.size()});
  for (std::size_t i = 0; i < top.size(); ++i) {
    const bool have = i < res.top_count;
    top_ids.data()[i] = have ? top[i].token : -1;
    top_lps.data()[i] = have ? top[i].logprob : -std::numeric_limits<float>::infinity();
  }
  nb::dict d;
  d["token"] = res.token;
  d["logprob"] = res.logprob;
  d["rank"] = res.rank;
  d["status"] = static_cast<int>(res.status);
  d["top_ids"] = top_ids;
  d["top_logprobs"] = top_lps;
  d["route"] = routes[static_cast<int>(route)];
  return d;
}

nb::object log_softmax(any_array logits, bool bf16_bits) {
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
  if (_import_array() < 0) throw nb::python_error();  // numpy's C API (the result arrays)
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
        nb::arg("outputs").none(), nb::arg("bitmasks").none(), nb::arg("out").none(), nb::arg("threads"),
        nb::arg("mask"), nb::arg("bf16_bits"));
  m.def("_sample_split", &sample_split, nb::arg("logits"), nb::arg("samplers"), nb::arg("seeds").none(),
        nb::arg("positions").none(), nb::arg("streams").none(), nb::arg("prompts").none(),
        nb::arg("outputs").none(), nb::arg("bitmasks").none(), nb::arg("threads"), nb::arg("bf16_bits"));
  m.def("_logprobs", &replay_logprobs, nb::arg("logits"), nb::arg("tokens"), nb::arg("samplers"),
        nb::arg("seeds").none(), nb::arg("positions").none(), nb::arg("streams").none(),
        nb::arg("prompts").none(), nb::arg("outputs").none(), nb::arg("bitmasks").none(), nb::arg("mode"),
        nb::arg("mask"), nb::arg("threads"), nb::arg("bf16_bits"));
  m.def("_top_logprobs", &top_logprobs, nb::arg("logits"), nb::arg("n"), nb::arg("bf16_bits"));
  m.def("_verify", &verify_drafts, nb::arg("target"), nb::arg("samplers"), nb::arg("drafts"),
        nb::arg("draft_probs").none(), nb::arg("seeds").none(), nb::arg("positions").none(),
        nb::arg("streams").none(), nb::arg("prompts").none(), nb::arg("outputs").none(), nb::arg("threads"),
        nb::arg("bf16_bits"));
  // The address the sampler reads a [B, V] array's first row from (the zero-copy test).
  m.def("_row_address", [](any_array logits, bool bf16_bits) {
    return reinterpret_cast<std::uintptr_t>(view_of(logits, true, bf16_bits).data);
  });
  m.def("_log_softmax", &log_softmax, nb::arg("logits"), nb::arg("bf16_bits"));
}
