#include "external/torch/host_staged_communicator.h"

#include <ATen/ATen.h>

namespace dtorch::external::torch {

namespace {

// On the host: a CPU tensor as it is, a GPU one copied (the copy waits for the current stream).
at::Tensor onHost(const at::Tensor& t) { return !t.defined() || t.is_cpu() ? t : t.cpu(); }
// Where the result goes: `out` itself when it lives on the host, else a host buffer like it.
at::Tensor hostBuffer(const at::Tensor& out) { return !out.defined() || out.is_cpu() ? out : at::empty(out.sizes(), out.options().device(at::kCPU)); }
void copyBack(at::Tensor& out, const at::Tensor& host) {
  if (out.defined() && !out.is_cpu()) out.copy_(host);
}

class HostStaged final : public Communicator {
 public:
  explicit HostStaged(std::shared_ptr<Communicator> host) : host_(std::move(host)) {}
  int size() const override { return host_->size(); }
  int position() const override { return host_->position(); }
  bool reducesNatively(at::ScalarType dtype) const override { return host_->reducesNatively(dtype); }

  void allGather(const at::Tensor& send, at::Tensor& recv) override {
    at::Tensor out = hostBuffer(recv);
    host_->allGather(onHost(send), out);
    copyBack(recv, out);
  }
  void allReduce(const at::Tensor& send, at::Tensor& recv, Reduction op) override {
    at::Tensor out = hostBuffer(recv);
    host_->allReduce(onHost(send), out, op);
    copyBack(recv, out);
  }
  void reduceScatter(const at::Tensor& send, at::Tensor& recv, Reduction op) override {
    at::Tensor out = hostBuffer(recv);
    host_->reduceScatter(onHost(send), out, op);
    copyBack(recv, out);
  }
  void exchange(const std::vector<at::Tensor>& sends, std::vector<at::Tensor>& recvs) override {
    std::vector<at::Tensor> hostSends, hostRecvs;
    for (const at::Tensor& s : sends) hostSends.push_back(onHost(s));
    for (const at::Tensor& r : recvs) hostRecvs.push_back(hostBuffer(r));
    host_->exchange(hostSends, hostRecvs);
    for (size_t p = 0; p < recvs.size(); ++p) copyBack(recvs[p], hostRecvs[p]);
  }

 private:
  std::shared_ptr<Communicator> host_;
};

}  // namespace

std::shared_ptr<Communicator> hostStaged(std::shared_ptr<Communicator> host) { return std::make_shared<HostStaged>(std::move(host)); }

}  // namespace dtorch::external::torch
