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
    DType::Float, DType::Half, DType::BFloat16, DType::Double, DType::Long,
    DType::Int,   DType::Short, DType::Char,   DType::Byte,   DType::Bool,
};

std::string_view dtypeName(DType dtype);
// Throws UNKNOWN_DTYPE listing the known names.
DType dtypeFromCode(int code);
bool isFloating(DType dtype);
int64_t dtypeSize(DType dtype);

}  // namespace dtorch::core
