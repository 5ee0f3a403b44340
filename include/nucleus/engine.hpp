// nucleus's engine layer: per-request samplers (processors + an engine's stage order), batches,
// thread pools, logprobs. Builds on the core; no Eigen, no I/O.
#pragma once

#include "nucleus/engine/batch.hpp"
#include "nucleus/engine/params.hpp"
#include "nucleus/engine/processors.hpp"
#include "nucleus/engine/sampler.hpp"
#include "nucleus/engine/speculative.hpp"
#include "nucleus/engine/thread_pool.hpp"
#include "nucleus/nucleus.hpp"
#include "nucleus/ops/logprobs_of.hpp"
