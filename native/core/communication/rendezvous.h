// Rendezvous: where the participants of one collective call on in-process workers meet. Each
// deposits its tensor (or the error that stops it) and waits until all have; then each reads
// what it needs from the others in shared memory. Workers reach collectives in the order the
// controller queued them, the same order on every worker, so they cannot deadlock; a timeout
// still bounds every wait.
#pragma once
#include <ATen/core/Tensor.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "core/blob/blob_table.h"

namespace dtorch::core {

// A participant's tensor and the marker that its producing work is done (CUDA: an event on the
// producer's stream; see external/cuda/device_sync.h). Readers call readable() first.
struct Contribution {
  at::Tensor tensor;
  std::shared_ptr<void> ready;
  // When present, readyFor[p] marks what participant p reads (its chunk, made before the rest),
  // and p waits for that instead of `ready`.
  std::vector<std::shared_ptr<void>> readyFor;
  // The tensor, ordered after its producer on this thread's stream and on `device`.
  at::Tensor readable(const c10::Device& device) const;
};

// Waits until this thread's reads of CUDA contributions are done, so that their producers may
// write the buffers again (in place) once the reader has left. A no-op for CPU tensors. (NCCL
// collectives will replace these peer copies and this wait.)
void finishReads(c10::ArrayRef<Contribution> read);

class Rendezvous {
 public:
  explicit Rendezvous(int size) : size_(size), slots_(size), algorithms_(size) {}

  int size() const { return size_; }

  // Deposits `mine` at `position` and returns every participant's contribution once all
  // arrived. Throws KERNEL_FAILED with the first deposited error, TIMEOUT (on every participant:
  // once one has waited `timeout` in vain, the call fails for all), or INTERNAL when the
  // participants name different `algorithm`s (they would launch mismatched GPU work, which
  // waits forever, so they must agree before anything is launched).
  const std::vector<Contribution>& exchange(int position, at::Tensor mine, std::chrono::milliseconds timeout, int algorithm = 0,
                                            std::vector<std::shared_ptr<void>> readyFor = {});
  // Arrives with an error instead of a tensor, and leaves.
  void abandon(const std::shared_ptr<const KernelError>& error);
  // Done reading; the last participant out drops the tensors.
  void depart();

 private:
  std::mutex mutex_;
  std::condition_variable allArrived_;
  const int size_;
  int arrived_ = 0;
  int departed_ = 0;
  std::vector<Contribution> slots_;
  std::vector<int> algorithms_;
  std::shared_ptr<const KernelError> error_;
};

// Mailbox: one sender, `receivers` readers (a tensor moving between meshes).
class Mailbox {
 public:
  explicit Mailbox(int receivers) : receivers_(receivers) {}
  void put(at::Tensor tensor, std::shared_ptr<const KernelError> error);
  // Waits for the tensor; throws KERNEL_FAILED with the sender's error, or TIMEOUT.
  Contribution take(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  bool full_ = false;
  int receivers_;
  Contribution slot_;
  std::shared_ptr<const KernelError> error_;
};

// Collection: `size` producers (one piece each), one consumer that takes them all.
class Collection {
 public:
  explicit Collection(int size) : slots_(size) {}
  void put(int index, at::Tensor tensor, std::shared_ptr<const KernelError> error);
  // Waits for every piece; throws KERNEL_FAILED with the first error, or TIMEOUT.
  std::vector<Contribution> takeAll(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable complete_;
  std::vector<Contribution> slots_;
  int arrived_ = 0;
  std::shared_ptr<const KernelError> error_;
};

// How long a collective waits for its group (DTORCH_COLLECTIVE_TIMEOUT_MS, default 10 min).
std::chrono::milliseconds collectiveTimeout();
// Replaces the environment's timeout for the waits that start from now on (0: back to it); tests
// use it to time out one collective and then run the mesh with the usual timeout again.
void setCollectiveTimeout(std::chrono::milliseconds timeout);

}  // namespace dtorch::core
