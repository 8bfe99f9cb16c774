// A Communicator for GPU tensors over one that moves host memory (c10d's Gloo between the
// processes of a cluster, until NCCL between processes is built): each call copies its GPU
// inputs to the host (after the work queued before it on the current stream), runs there, and
// copies the results back onto the current stream. Correct on any GPUs, but bounded by the
// host's copies and network: NCCL is the fast path.
#pragma once
#include <memory>

#include "external/communicator.h"

namespace dtorch::external::torch {

std::shared_ptr<Communicator> hostStaged(std::shared_ptr<Communicator> host);

}  // namespace dtorch::external::torch
