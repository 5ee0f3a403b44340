// dynamic_temperature(t, range, exponent): entropy-based temperature (llama.cpp's temp_ext, the
// server's dynatemp_range / dynatemp_exponent). With range > 0 the temperature is
//   max(0, t - range) + ((t + range) - max(0, t - range)) * (H / ln n)^exponent,
// H the entropy (nats) of the candidates at the current temperature and n their count: confident rows
// are sharpened, uncertain ones flattened. With range <= 0 it is temperature(t). A row of one
// candidate is left as it is. A resulting temperature of 0 is greedy.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>

#include "nucleus/core/chain.hpp"
#include "nucleus/core/row_stats.hpp"
#include "nucleus/stages/min_keep.hpp"

namespace nucleus {

struct dynamic_temperature_stage : stage<dynamic_temperature_stage> {
  static constexpr stage_info info{.tempers = true};

  float temperature;  // t, the centre of the range
  float range;        // <= 0: a plain temperature t
  float exponent;     // >= 0

  // The temperature this row gets (t itself when range <= 0 or the row has < 2 candidates).
  float temperature_for(row_state& s) const noexcept {
    if (range <= 0.0f) return temperature;
    s.max_logit();
    return temperature_for(s, detail::candidate_count(s));
  }

  void apply(row_state& s) const noexcept {
    float dyn = temperature;
    if (range > 0.0f) {
      s.max_logit();
      if (!s.live()) return;
      const std::size_t n = detail::candidate_count(s);
      if (n < 2) return;
      dyn = temperature_for(s, n);
    }
    if (dyn == 0.0f) {
      s.set_greedy();
    } else {
      s.scale_inv_temperature(1.0f / dyn);
    }
  }

 private:
  // ... given its n candidates (counted once).
  float temperature_for(row_state& s, std::size_t n) const noexcept {
    if (n < 2) return temperature;
    const double lo = std::max(0.0, static_cast<double>(temperature) - static_cast<double>(range));
    const double hi = static_cast<double>(temperature) + static_cast<double>(range);
    const double h = detail::moments(s).entropy() / std::log(static_cast<double>(n));
    return static_cast<float>(lo +
                              (hi - lo) * std::pow(std::clamp(h, 0.0, 1.0), static_cast<double>(exponent)));
  }
};

inline dynamic_temperature_stage dynamic_temperature(float t, float range, float exponent) {
  if (!(t >= 0.0f) || std::isinf(t))
    throw std::invalid_argument("nucleus::dynamic_temperature: t must be finite and >= 0");
  if (std::isnan(range) || std::isinf(range))
    throw std::invalid_argument("nucleus::dynamic_temperature: range must be finite (<= 0 disables)");
  if (!(exponent >= 0.0f) || std::isinf(exponent))
    throw std::invalid_argument("nucleus::dynamic_temperature: exponent must be finite and >= 0");
  return dynamic_temperature_stage{{}, t, range, exponent};
}

}  // namespace nucleus
