// The weight-loading layer: formats, the weight_source concept, dequantization.
#pragma once

#include "nucleus/io/dequantize.hpp"
#include "nucleus/io/dtype.hpp"
#include "nucleus/io/error.hpp"
#include "nucleus/io/gguf.hpp"
#include "nucleus/io/half.hpp"
#include "nucleus/io/memory_source.hpp"
#include "nucleus/io/metadata.hpp"
#include "nucleus/io/progress.hpp"
#include "nucleus/io/safetensors.hpp"
#include "nucleus/io/tensor.hpp"
#include "nucleus/io/weight_source.hpp"
