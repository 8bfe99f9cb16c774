// NCCL for in-process groups of GPUs: one communicator per participant of a group of CUDA
// devices (the ranks along one mesh dim, in group order), created together the first time the
// group communicates (ncclCommInitAll) and cached for the life of the process. Calls queue on
// the calling thread's current stream and return at once. Linked against the NCCL that LibTorch
// itself loads, so that the process holds one NCCL. Without NCCL in the build, available() is
// false and the engine moves data between GPUs with peer copies instead.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "external/communicator.h"

namespace dtorch::external::nccl {

bool available();
// e.g. "2.28.3"; empty without NCCL
std::string version();

// The communicator of `position` in the group of CUDA `devices` (distinct device indices).
// Thread-safe; the first caller creates the whole group's communicators.
std::shared_ptr<external::Communicator> communicatorFor(const std::vector<int>& devices, int position);

}  // namespace dtorch::external::nccl
