// The op stream's payloads: what the main node sends each worker (the cluster's devices, meshes,
// recorded segments) and what a worker sends back (read values, sync acknowledgements, a stream
// it had to reject), in a versioned little-endian binary format documented in docs/cluster.md
// ("The op stream: payloads"). The transport (packages/external's op_stream.ts) frames, orders
// and authenticates the messages; this file only encodes and checks their contents. Decoding
// never trusts a length: every read is bounded by the message, every count and index by the
// limits below, so a malformed payload is a PROTOCOL_ERROR, never a crash.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/membership/membership.h"
#include "core/operand/mesh.h"
#include "core/program/completion.h"
#include "core/program/segment.h"

namespace dtorch::core::stream {

inline constexpr uint32_t kMagic = 0x4d535444;  // "DTSM" in little-endian order
inline constexpr uint16_t kVersion = 1;

enum class Type : uint8_t {
  kDevices = 1,   // main -> worker: cluster devices (added to what the worker knows)
  kMesh = 2,      // main -> worker: one mesh, with the id the main node gave it
  kSegment = 3,   // main -> worker: recorded nodes, in record order
  kRead = 16,     // worker -> main: the value (or failure) of a read the worker answers
  kSynced = 17,   // worker -> main: a sync is done on the worker's devices (or failed)
  kRejected = 18, // worker -> main: the worker refused a payload; its state no longer follows the program
};

// Limits a decoder enforces (far above what a program records).
inline constexpr size_t kMaxNodes = 1u << 22;
inline constexpr size_t kMaxIds = 1u << 16;
inline constexpr size_t kMaxAttrs = 1u << 16;
inline constexpr size_t kMaxDims = 16;
inline constexpr size_t kMaxMeshDevices = 1u << 16;
inline constexpr int64_t kMaxDimSize = int64_t{1} << 40;

std::string encodeDevices(const std::vector<ClusterDevice>& devices);
std::string encodeMesh(const DeviceMesh& mesh);
std::string encodeSegment(const Segment& segment);
std::string encodeRead(uint64_t seq, const FetchResult& result);
std::string encodeSynced(uint64_t seq, const FetchResult& result);
std::string encodeRejected(const std::string& why);

// A decoded payload: `type` says which fields are set. Segment nodes come with their op resolved
// and their metas decoded, but not checked against the receiver's tensors (the sub-controller
// does that) and without op state.
struct Message {
  Type type = Type::kSegment;
  std::vector<ClusterDevice> devices;  // kDevices
  DeviceMesh mesh;                     // kMesh
  std::vector<Node> nodes;             // kSegment
  uint64_t seq = 0;                    // kRead, kSynced
  FetchResult result;                  // kRead, kSynced
  std::string why;                     // kRejected
};

// Throws PROTOCOL_ERROR naming what is wrong and where.
Message decode(std::string_view payload);

}  // namespace dtorch::core::stream
