#include "core/operators/registry.h"

#include "common/error.h"

namespace dtorch::core {

OpRegistry::OpRegistry() {
  registerCreationOps(*this);
  registerElementwiseOps(*this);
  registerMatmulOps(*this);
  registerReductionOps(*this);
  registerCastOps(*this);
  registerRedistributeOps(*this);
  registerShapeOps(*this);
  registerNnOps(*this);
  registerImageOps(*this);
  registerAttentionOps(*this);
  registerOverlappedLinearOps(*this);
  registerFp8LinearOps(*this);
  registerLoraJoinOps(*this);
}

const OpRegistry& OpRegistry::instance() {
  static const OpRegistry registry;
  return registry;
}

const OpDef& OpRegistry::byCode(int code) const {
  if (code < 0 || code >= static_cast<int>(ops_.size())) {
    common::fail(common::code::kUnknownOp, "unknown operator code " + std::to_string(code));
  }
  return ops_[code];
}

const OpDef* OpRegistry::find(std::string_view name) const {
  for (const OpDef& op : ops_) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

}  // namespace dtorch::core
