#include "core/cluster/stream_codec.h"

#include <ATen/ATen.h>

#include <cstring>
#include <type_traits>

#include "common/error.h"
#include "core/operators/op.h"
#include "core/operators/registry.h"

namespace dtorch::core::stream {

namespace {

// ---- writing --------------------------------------------------------------------------------

class Writer {
 public:
  explicit Writer(Type type) {
    put<uint32_t>(kMagic);
    put<uint16_t>(kVersion);
    put<uint8_t>(static_cast<uint8_t>(type));
  }
  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));  // the hosts DTorch runs on are little-endian
    out_.append(bytes, sizeof(T));
  }
  void bytes(const void* data, size_t n) { out_.append(static_cast<const char*>(data), n); }
  void text(std::string_view s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  void tensor(const at::Tensor& t) {  // dtype, shape, then the contiguous bytes
    const at::Tensor c = t.contiguous();
    put<uint8_t>(static_cast<uint8_t>(c.scalar_type()));
    put<uint8_t>(static_cast<uint8_t>(c.dim()));
    for (int64_t s : c.sizes()) put<int64_t>(s);
    put<uint64_t>(c.nbytes());
    bytes(c.data_ptr(), c.nbytes());
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

void putMeta(Writer& w, const TensorMeta& m) {
  w.put<uint8_t>(static_cast<uint8_t>(m.dtype));
  w.put<uint8_t>(static_cast<uint8_t>(m.shape.size()));
  for (int64_t s : m.shape) w.put<int64_t>(s);
  w.put<uint32_t>(static_cast<uint32_t>(m.meshId));
  w.put<uint8_t>(static_cast<uint8_t>(m.placements.size()));
  for (const Placement& p : m.placements) w.put<int32_t>(p.encode());
}

void putResult(Writer& w, const FetchResult& r, bool withValue) {
  w.put<uint8_t>(r.ok ? 1 : 0);
  if (!r.ok) {
    w.text(r.code);
    w.text(r.message);
    w.text(r.op);
    w.put<uint64_t>(r.seq);
    return;
  }
  if (!withValue) return;
  w.put<uint8_t>(static_cast<uint8_t>(r.dtype));
  w.put<uint8_t>(r.host.defined() ? 1 : 0);
  if (r.host.defined()) w.tensor(r.host);
}

// ---- reading --------------------------------------------------------------------------------

[[noreturn]] void malformed(const std::string& what) {
  common::fail(common::code::kProtocol, "malformed op stream payload: " + what);
}

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  template <typename T>
  T get(const char* what) {
    if (in_.size() - at_ < sizeof(T)) malformed(std::string("truncated at ") + what + " (byte " + std::to_string(at_) + ")");
    T value;
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string_view bytes(uint64_t n, const char* what) {
    if (n > in_.size() - at_) malformed(std::string(what) + " of " + std::to_string(n) + " bytes runs past the payload's end");
    std::string_view out = in_.substr(at_, n);
    at_ += n;
    return out;
  }
  std::string text(const char* what, size_t limit = 1 << 20) {
    const uint32_t n = get<uint32_t>(what);
    if (n > limit) malformed(std::string(what) + " is " + std::to_string(n) + " bytes long (at most " + std::to_string(limit) + ")");
    return std::string(bytes(n, what));
  }
  // A count no larger than `limit`.
  size_t count(size_t value, size_t limit, const char* what) {
    if (value > limit) malformed(std::string(what) + " is " + std::to_string(value) + " (at most " + std::to_string(limit) + ")");
    return value;
  }
  bool done() const { return at_ == in_.size(); }
  size_t offset() const { return at_; }

 private:
  std::string_view in_;
  size_t at_ = 0;
};

DType readDtype(Reader& r, const char* what) {
  const int code = r.get<uint8_t>(what);
  for (DType d : kSupportedDtypes) {
    if (static_cast<int>(d) == code) return d;
  }
  malformed(std::string(what) + " has unknown dtype code " + std::to_string(code));
}

Shape readShape(Reader& r, const char* what) {
  const size_t ndim = r.count(r.get<uint8_t>(what), kMaxDims, "a tensor's rank");
  Shape shape;
  int64_t numel = 1;
  for (size_t i = 0; i < ndim; ++i) {
    const int64_t s = r.get<int64_t>(what);
    if (s < 0 || s > kMaxDimSize) malformed(std::string(what) + " has a dim of size " + std::to_string(s));
    numel = s == 0 || numel == 0 ? 0 : numel * s;
    if (numel > kMaxDimSize) malformed(std::string(what) + " has more than 2^40 elements");
    shape.push_back(s);
  }
  return shape;
}

TensorMeta readMeta(Reader& r) {
  TensorMeta m;
  m.dtype = readDtype(r, "an output's meta");
  m.shape = readShape(r, "an output's shape");
  m.meshId = static_cast<int>(r.count(r.get<uint32_t>("an output's mesh"), 1u << 20, "a mesh id"));
  const size_t n = r.count(r.get<uint8_t>("placements"), kMaxDims, "a placement count");
  for (size_t i = 0; i < n; ++i) {
    const int32_t code = r.get<int32_t>("a placement");
    if (code < -5 || code >= static_cast<int32_t>(m.shape.size())) {
      malformed("placement code " + std::to_string(code) + " for a tensor of rank " + std::to_string(m.shape.size()));
    }
    m.placements.push_back(Placement::decode(code));
  }
  return m;
}

at::Tensor readTensor(Reader& r, const char* what) {
  const DType dtype = readDtype(r, what);
  const Shape shape = readShape(r, what);
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  const uint64_t nbytes = r.get<uint64_t>(what);
  if (nbytes != static_cast<uint64_t>(numel * dtypeSize(dtype))) {
    malformed(std::string(what) + " says " + std::to_string(nbytes) + " bytes for " + std::to_string(numel) + " elements of " +
              std::string(dtypeName(dtype)));
  }
  const std::string_view data = r.bytes(nbytes, what);
  at::Tensor t = at::empty(c10::IntArrayRef(shape.data(), shape.size()), at::TensorOptions().dtype(dtype));
  if (nbytes) std::memcpy(t.data_ptr(), data.data(), nbytes);
  return t;
}

template <typename Ids>
void readIds(Reader& r, Ids& ids, const char* what) {
  const size_t n = r.count(r.get<uint16_t>(what), kMaxIds, what);
  for (size_t i = 0; i < n; ++i) {
    const int64_t id = r.get<int64_t>(what);
    if (id <= 0) malformed(std::string(what) + " holds tensor id " + std::to_string(id));
    ids.push_back(id);
  }
}

FetchResult readResult(Reader& r, bool withValue) {
  FetchResult result;
  const uint8_t ok = r.get<uint8_t>("a result's status");
  if (ok > 1) malformed("a result's status is " + std::to_string(ok));
  result.ok = ok == 1;
  if (!result.ok) {
    result.code = r.text("an error code", 64);
    result.message = r.text("an error message");
    result.op = r.text("the failed op", 256);
    result.seq = r.get<uint64_t>("the failed node");
    return result;
  }
  if (!withValue) return result;
  result.dtype = readDtype(r, "the read's dtype");
  const uint8_t has = r.get<uint8_t>("the read's value flag");
  if (has > 1) malformed("the read's value flag is " + std::to_string(has));
  if (has) result.host = readTensor(r, "the read's value");
  return result;
}

Node readNode(Reader& r) {
  Node node;
  const uint8_t kind = r.get<uint8_t>("a node's kind");
  if (kind > static_cast<uint8_t>(NodeKind::kSync)) malformed("node kind " + std::to_string(kind));
  node.kind = static_cast<NodeKind>(kind);
  node.seq = r.get<uint64_t>("a node's sequence number");
  switch (node.kind) {
    case NodeKind::kCompute: {
      const std::string name = r.text("an op name", 128);
      node.op = OpRegistry::instance().find(name);
      if (!node.op) malformed("unknown op \"" + name + "\" (is every node on the same DTorch version?)");
      node.meshId = static_cast<int>(r.count(r.get<uint32_t>("a node's mesh"), 1u << 20, "a mesh id"));
      node.inputMeshId = static_cast<int>(r.count(r.get<uint32_t>("a node's input mesh"), 1u << 20, "a mesh id"));
      readIds(r, node.inputs, "a node's inputs");
      if (node.op->numInputs >= 0 && node.inputs.size() != static_cast<size_t>(node.op->numInputs)) {
        malformed(std::string(node.op->name) + " with " + std::to_string(node.inputs.size()) + " inputs (it takes " +
                  std::to_string(node.op->numInputs) + ")");
      }
      readIds(r, node.outputs, "a node's outputs");
      const size_t nAttrs = r.count(r.get<uint16_t>("an attribute count"), kMaxAttrs, "an attribute count");
      node.userAttrs = static_cast<uint32_t>(r.count(r.get<uint16_t>("a program attribute count"), nAttrs, "a program attribute count"));
      for (size_t i = 0; i < nAttrs; ++i) node.attrs.push_back(r.get<double>("an attribute"));
      for (size_t i = 0; i < node.outputs.size(); ++i) node.outputMetas.push_back(readMeta(r));
      const uint8_t has = r.get<uint8_t>("a host data flag");
      if (has > 1) malformed("a host data flag is " + std::to_string(has));
      if (has) node.hostData = readTensor(r, "a node's host data");
      break;
    }
    case NodeKind::kRelease:
    case NodeKind::kFetch: {
      node.meshId = static_cast<int>(r.count(r.get<uint32_t>("a node's mesh"), 1u << 20, "a mesh id"));
      const int64_t id = r.get<int64_t>("a tensor id");
      if (id <= 0) malformed("tensor id " + std::to_string(id));
      if (node.kind == NodeKind::kRelease) node.outputs.push_back(id);
      else node.inputs.push_back(id);
      break;
    }
    case NodeKind::kSync: break;
  }
  return node;
}

}  // namespace

// ---- encoders -------------------------------------------------------------------------------

std::string encodeDevices(const std::vector<ClusterDevice>& devices) {
  Writer w(Type::kDevices);
  w.put<uint32_t>(static_cast<uint32_t>(devices.size()));
  for (const ClusterDevice& d : devices) {
    w.put<uint8_t>(static_cast<uint8_t>(d.device.kind));
    w.put<uint32_t>(static_cast<uint32_t>(d.device.index));
    w.put<uint32_t>(static_cast<uint32_t>(d.node));
    w.put<uint32_t>(static_cast<uint32_t>(d.localIndex));
  }
  return w.take();
}

std::string encodeMesh(const DeviceMesh& mesh) {
  Writer w(Type::kMesh);
  w.put<uint32_t>(static_cast<uint32_t>(mesh.id));
  w.put<uint8_t>(static_cast<uint8_t>(mesh.kind));
  w.put<uint32_t>(static_cast<uint32_t>(mesh.devices.size()));
  for (int d : mesh.devices) w.put<uint32_t>(static_cast<uint32_t>(d));
  w.put<uint8_t>(static_cast<uint8_t>(mesh.shape.size()));
  for (int64_t s : mesh.shape) w.put<int64_t>(s);
  return w.take();
}

std::string encodeSegment(const Segment& segment) {
  Writer w(Type::kSegment);
  w.put<uint32_t>(static_cast<uint32_t>(segment.nodes.size()));
  for (const Node& node : segment.nodes) {
    w.put<uint8_t>(static_cast<uint8_t>(node.kind));
    w.put<uint64_t>(node.seq);
    switch (node.kind) {
      case NodeKind::kCompute:
        w.text(node.op->name);
        w.put<uint32_t>(static_cast<uint32_t>(node.meshId));
        w.put<uint32_t>(static_cast<uint32_t>(node.inputMeshId));
        w.put<uint16_t>(static_cast<uint16_t>(node.inputs.size()));
        for (int64_t id : node.inputs) w.put<int64_t>(id);
        w.put<uint16_t>(static_cast<uint16_t>(node.outputs.size()));
        for (int64_t id : node.outputs) w.put<int64_t>(id);
        w.put<uint16_t>(static_cast<uint16_t>(node.attrs.size()));
        w.put<uint16_t>(static_cast<uint16_t>(node.userAttrs));
        for (double a : node.attrs) w.put<double>(a);
        for (const TensorMeta& m : node.outputMetas) putMeta(w, m);
        w.put<uint8_t>(node.hostData.defined() ? 1 : 0);
        if (node.hostData.defined()) w.tensor(node.hostData);
        break;
      case NodeKind::kRelease:
        w.put<uint32_t>(static_cast<uint32_t>(node.meshId));
        w.put<int64_t>(node.outputs[0]);
        break;
      case NodeKind::kFetch:
        w.put<uint32_t>(static_cast<uint32_t>(node.meshId));
        w.put<int64_t>(node.inputs[0]);
        break;
      case NodeKind::kSync: break;
    }
  }
  return w.take();
}

std::string encodeRead(uint64_t seq, const FetchResult& result) {
  Writer w(Type::kRead);
  w.put<uint64_t>(seq);
  putResult(w, result, true);
  return w.take();
}

std::string encodeSynced(uint64_t seq, const FetchResult& result) {
  Writer w(Type::kSynced);
  w.put<uint64_t>(seq);
  putResult(w, result, false);
  return w.take();
}

std::string encodeRejected(const std::string& why) {
  Writer w(Type::kRejected);
  w.text(why);
  return w.take();
}

// ---- decoder --------------------------------------------------------------------------------

Message decode(std::string_view payload) {
  Reader r(payload);
  if (r.get<uint32_t>("the magic number") != kMagic) malformed("it does not start with DTSM");
  const uint16_t version = r.get<uint16_t>("the format version");
  if (version != kVersion) {
    malformed("format version " + std::to_string(version) + ", this node reads " + std::to_string(kVersion) +
              " (run the same DTorch version on every node)");
  }
  Message m;
  const uint8_t type = r.get<uint8_t>("the message type");
  m.type = static_cast<Type>(type);
  switch (m.type) {
    case Type::kDevices: {
      const size_t n = r.count(r.get<uint32_t>("a device count"), kMaxMeshDevices, "a device count");
      for (size_t i = 0; i < n; ++i) {
        ClusterDevice d;
        const uint8_t kind = r.get<uint8_t>("a device kind");
        if (kind > 1) malformed("device kind " + std::to_string(kind));
        d.device.kind = static_cast<DeviceKind>(kind);
        d.device.index = static_cast<int>(r.count(r.get<uint32_t>("a device index"), 1u << 20, "a device index"));
        d.node = static_cast<int>(r.count(r.get<uint32_t>("a node number"), 1u << 20, "a node number"));
        d.localIndex = static_cast<int>(r.count(r.get<uint32_t>("a local device index"), 1023, "a local device index"));
        m.devices.push_back(d);
      }
      break;
    }
    case Type::kMesh: {
      m.mesh.id = static_cast<int>(r.count(r.get<uint32_t>("a mesh id"), 1u << 20, "a mesh id"));
      const uint8_t kind = r.get<uint8_t>("a mesh kind");
      if (kind > 1) malformed("mesh kind " + std::to_string(kind));
      m.mesh.kind = static_cast<DeviceKind>(kind);
      const size_t n = r.count(r.get<uint32_t>("a mesh's device count"), kMaxMeshDevices, "a mesh's device count");
      if (n == 0) malformed("a mesh of no devices");
      for (size_t i = 0; i < n; ++i) m.mesh.devices.push_back(static_cast<int>(r.count(r.get<uint32_t>("a mesh device"), 1u << 20, "a device index")));
      const size_t ndim = r.count(r.get<uint8_t>("a mesh's rank"), kMaxDims, "a mesh's rank");
      int64_t product = 1;
      for (size_t i = 0; i < ndim; ++i) {
        const int64_t s = r.get<int64_t>("a mesh dim");
        if (s < 1 || s > static_cast<int64_t>(kMaxMeshDevices)) malformed("mesh dim of size " + std::to_string(s));
        product *= s;
        if (product > static_cast<int64_t>(kMaxMeshDevices)) malformed("a mesh shape of more than 65536 devices");
        m.mesh.shape.push_back(s);
      }
      if (product != static_cast<int64_t>(n)) malformed("a mesh shape that does not hold its " + std::to_string(n) + " devices");
      break;
    }
    case Type::kSegment: {
      const size_t n = r.count(r.get<uint32_t>("a node count"), kMaxNodes, "a node count");
      m.nodes.reserve(std::min<size_t>(n, 4096));
      for (size_t i = 0; i < n; ++i) m.nodes.push_back(readNode(r));
      break;
    }
    case Type::kRead:
    case Type::kSynced:
      m.seq = r.get<uint64_t>("a sequence number");
      m.result = readResult(r, m.type == Type::kRead);
      break;
    case Type::kRejected: m.why = r.text("a reason"); break;
    default: malformed("unknown message type " + std::to_string(type));
  }
  if (!r.done()) malformed(std::to_string(payload.size() - r.offset()) + " bytes left after the message");
  return m;
}

}  // namespace dtorch::core::stream
