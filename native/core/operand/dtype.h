// Data types: the engine uses c10::ScalarType directly; this file names the subset we expose
// and maps them to the lowercase names of the TypeScript API ("float32", "bfloat16", ...).
#pragma once
#include <c10/core/ScalarType.h>

#include <string>
#include <string_view>

namespace dtorch::core {

using DType = c10::ScalarType;

// Every dtype the API accepts, in the order the TypeScript table lists them.
inline constexpr DType kSupportedDtypes[] = {
    DType::Float, DType::Half,  DType::BFloat16, DType::Double, DType::Long,          DType::Int,
    DType::Short, DType::Char,  DType::Byte,     DType::Bool,   DType::Float8_e4m3fn, DType::Float8_e5m2,
};

// The 8-bit floats (weights of FP8 checkpoints and quantized linears): few ops take them.
inline bool isFloat8(DType dtype) { return dtype == DType::Float8_e4m3fn || dtype == DType::Float8_e5m2; }

std::string_view dtypeName(DType dtype);
// Throws UNKNOWN_DTYPE listing the known names.
DType dtypeFromCode(int code);
bool isFloating(DType dtype);
int64_t dtypeSize(DType dtype);

}  // namespace dtorch::core
