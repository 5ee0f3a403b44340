// nucleus: logits in, next token out. The sampling core: stages, chains, kernels. No Eigen, no I/O.
#pragma once

#include "nucleus/core/chain.hpp"
#include "nucleus/core/distribution.hpp"
#include "nucleus/core/draw_key.hpp"
#include "nucleus/core/result.hpp"
#include "nucleus/core/row_state.hpp"
#include "nucleus/core/workspace.hpp"
#include "nucleus/ops/log_softmax.hpp"
#include "nucleus/ops/top_logprobs.hpp"
#include "nucleus/stages/argmax.hpp"
#include "nucleus/stages/categorical.hpp"
#include "nucleus/stages/min_p.hpp"
#include "nucleus/stages/temperature.hpp"
#include "nucleus/stages/top_k.hpp"
#include "nucleus/stages/top_p.hpp"
#include "nucleus/version.hpp"
