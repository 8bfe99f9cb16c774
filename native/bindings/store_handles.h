// The rendezvous stores the external slice opened, by the handle JS holds: the cluster slice
// hands one to the engine, where c10d process groups meet.
#pragma once
#include <napi.h>

#include <memory>

namespace dtorch::external::torch {
class RendezvousStore;
}

namespace dtorch::bindings {

// Throws INVALID_ARGUMENT for a closed or unknown handle.
std::shared_ptr<external::torch::RendezvousStore> storeOfHandle(const Napi::Value& handle);

}  // namespace dtorch::bindings
