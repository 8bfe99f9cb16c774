// c10d process groups as Communicators, for collectives between the processes of a cluster:
// Gloo for CPU tensors (NCCL for GPUs will take the same shape). The participants meet through
// the cluster's rendezvous store; each call blocks until it is done and fails as a DTorchError
// (TIMEOUT, NETWORK_ERROR) naming the group and the call, never a hang.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "external/communicator.h"
#include "external/torch/rendezvous_store.h"

namespace dtorch::external::torch {

// The Gloo communicator of `position` in the group of `size` participants named `groupKey`
// (unique per group in the store: its keys live under that prefix). Creating it is a collective:
// it blocks until every participant has called (from its own thread or process), and fails after
// `timeout`, which then bounds each later call too. Cached per (store, groupKey, position) for
// the life of the process, a failure too (the group's keys are spent: a new try needs a new
// key); thread-safe.
//
// `host` is the address this participant's Gloo binds and gives its peers: the machine's address
// that they can reach ("127.0.0.1" for a group within one machine). Empty: c10d's own choice
// (GLOO_SOCKET_IFNAME's interfaces, else the address this machine's hostname resolves to, else
// loopback), which containers without a resolvable hostname get wrong.
std::shared_ptr<external::Communicator> glooCommunicator(std::shared_ptr<RendezvousStore> store, const std::string& groupKey,
                                                         int position, int size, std::chrono::milliseconds timeout,
                                                         const std::string& host);

// Ends the groups opened so far: a wait in one of their calls fails within 100 ms, and their
// later calls fail at once, with NETWORK_ERROR naming `why`. For a process that leaves its
// cluster, whose peers may never answer (a main node stopped or cut off sends no reset: its
// peers would otherwise wait out the collective timeout, and the process could not exit).
// Groups opened afterwards are not affected. Thread-safe.
void abortGlooGroups(const std::string& why);

}  // namespace dtorch::external::torch
