// DTorchError: the one exception type the engine throws for bad input or failed work.
// It carries a stable code (see codes below) that crosses the binding as `err.code`.
#pragma once
#include <stdexcept>
#include <string>

namespace dtorch::common {

// Stable error codes; the TypeScript side names them in @dtorch/common errors.ts, and
// tests/engine/native_tables.test.ts checks it has every one of kAll (exported by the binding).
namespace code {
inline constexpr const char* kInvalidArgument = "INVALID_ARGUMENT";
inline constexpr const char* kShapeMismatch = "SHAPE_MISMATCH";
inline constexpr const char* kDtypeMismatch = "DTYPE_MISMATCH";
inline constexpr const char* kUnknownDtype = "UNKNOWN_DTYPE";
inline constexpr const char* kUnknownOp = "UNKNOWN_OP";
inline constexpr const char* kPlacementMismatch = "PLACEMENT_MISMATCH";
inline constexpr const char* kMeshMismatch = "MESH_MISMATCH";
inline constexpr const char* kInvalidMesh = "INVALID_MESH";
inline constexpr const char* kDisposed = "TENSOR_DISPOSED";
inline constexpr const char* kKernelFailed = "KERNEL_FAILED";
inline constexpr const char* kTimeout = "TIMEOUT";
inline constexpr const char* kShutdown = "ENGINE_SHUT_DOWN";
inline constexpr const char* kNetwork = "NETWORK_ERROR";
inline constexpr const char* kProtocol = "PROTOCOL_ERROR";
inline constexpr const char* kNodeLost = "NODE_LOST";
inline constexpr const char* kInternal = "INTERNAL";
// Every code above: a new code goes here too.
inline constexpr const char* kAll[] = {kInvalidArgument, kShapeMismatch, kDtypeMismatch, kUnknownDtype, kUnknownOp, kPlacementMismatch,
                                       kMeshMismatch,    kInvalidMesh,   kDisposed,      kKernelFailed, kTimeout,   kShutdown,
                                       kNetwork,         kProtocol,      kNodeLost,      kInternal};
}  // namespace code

class DTorchError : public std::runtime_error {
 public:
  DTorchError(std::string code, const std::string& message)
      : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const { return code_; }

 private:
  std::string code_;
};

[[noreturn]] inline void fail(const char* code, const std::string& message) {
  throw DTorchError(code, message);
}

}  // namespace dtorch::common
