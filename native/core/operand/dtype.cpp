#include "core/operand/dtype.h"

#include "common/error.h"

namespace dtorch::core {

std::string_view dtypeName(DType dtype) {
  switch (dtype) {
    case DType::Float: return "float32";
    case DType::Half: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Double: return "float64";
    case DType::Long: return "int64";
    case DType::Int: return "int32";
    case DType::Short: return "int16";
    case DType::Char: return "int8";
    case DType::Byte: return "uint8";
    case DType::Bool: return "bool";
    case DType::Float8_e4m3fn: return "float8_e4m3fn";
    case DType::Float8_e5m2: return "float8_e5m2";
    default: return "unsupported";
  }
}

DType dtypeFromCode(int code) {
  for (DType d : kSupportedDtypes) {
    if (static_cast<int>(d) == code) return d;
  }
  common::fail(common::code::kUnknownDtype,
               "unknown dtype code " + std::to_string(code) +
                   "; expected one of float32, float16, bfloat16, float64, int64, int32, int16, int8, uint8, bool, float8_e4m3fn, float8_e5m2");
}

bool isFloating(DType dtype) { return c10::isFloatingType(dtype); }

int64_t dtypeSize(DType dtype) { return static_cast<int64_t>(c10::elementSize(dtype)); }

}  // namespace dtorch::core
