// The one operator table. Families add their OpDefs at startup; ids are table positions and
// are handed to TypeScript by name, so the native table is the single source of truth.
#pragma once
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "core/operators/op.h"

namespace dtorch::core {

class OpRegistry {
 public:
  static const OpRegistry& instance();
  const std::vector<OpDef>& ops() const { return ops_; }
  const OpDef& byCode(int code) const;
  const OpDef* find(std::string_view name) const;
  int codeOf(const OpDef& op) const { return static_cast<int>(&op - ops_.data()); }

  void add(const OpDef& op) { ops_.push_back(op); }
  // Keeps a generated op name alive for the registry's lifetime.
  std::string_view intern(std::string name) { return names_.emplace_back(std::move(name)); }

 private:
  OpRegistry();
  std::vector<OpDef> ops_;
  std::deque<std::string> names_;
};

// Registration entry points, one per op family file.
void registerCreationOps(OpRegistry& registry);
void registerElementwiseOps(OpRegistry& registry);
void registerMatmulOps(OpRegistry& registry);
void registerReductionOps(OpRegistry& registry);
void registerCastOps(OpRegistry& registry);
void registerRedistributeOps(OpRegistry& registry);
void registerShapeOps(OpRegistry& registry);
void registerNnOps(OpRegistry& registry);
void registerImageOps(OpRegistry& registry);
void registerAttentionOps(OpRegistry& registry);
void registerOverlappedLinearOps(OpRegistry& registry);
void registerFp8LinearOps(OpRegistry& registry);
void registerLoraJoinOps(OpRegistry& registry);

}  // namespace dtorch::core
