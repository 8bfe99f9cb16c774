// What the worker needs from the data-movement ops outside their kernels.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>

#include "core/blob/blob_table.h"
#include "core/graph/node.h"

namespace dtorch::core {

// kSend of a transfer node: hands the input (or the error that replaced it) to the receivers.
void sendTransfer(const Node& node, const at::Tensor* tensor, std::shared_ptr<const KernelError> error);

}  // namespace dtorch::core
