// The op stream: the main program sends each recorded segment (the native engine's opaque bytes)
// to every worker, in order, over ZeroMQ; workers send small replies back (read values, sync acks).
// The main node binds a ROUTER (OpStreamServer), each worker connects a DEALER (OpStreamClient).
// The control plane (control.proto's Welcome) tells a worker the port and its session key.
//
// Framing. Every message is one ZeroMQ multipart message: a 32-byte header
// frame, then zero or more payload frames whose concatenation is the payload (where a sender
// splits it carries no meaning). The header, little-endian:
//
//   bytes  0-3   magic "DTOS"
//   bytes  4-5   u16 framing version (1)
//   byte   6     u8 type: 1 hello (worker to main, its first message; the payload is its 32-byte
//                session key), 2 segment (main to worker), 3 reply (worker to main)
//   byte   7     u8 flags, 0
//   bytes  8-15  u64 sequence number: 1, 2, 3, ... per direction and node; the hello is the
//                worker's 1, its first reply 2
//   bytes 16-23  u64 payload bytes
//   bytes 24-27  reserved, 0
//   bytes 28-31  u32 CRC-32 (zlib's) of bytes 0-27 and then the payload
//
// A receiver drops a message with a wrong magic, another version, a type it does not take, a short
// header, non-zero reserved bytes, a payload other than the header's length or over
// maxMessageBytes, a wrong checksum, or a sequence number other than the next; the main side also
// drops everything from a peer whose first message was not a hello carrying an admitted key. Each
// drop calls the onReject listeners and is logged (the first of each kind per peer at warn, later
// ones at debug); the stream goes on with the next expected number. ZeroMQ itself disconnects a
// peer that sends a frame over maxMessageBytes (ZMQ_MAXMSGSIZE).
//
// Using it: admit(node, key) before the worker is given the key; `await server.connected(node)`
// waits for its hello (a send before it is held in memory, in order). send() resolves true once
// ZeroMQ has queued the message: up to sendHighWaterMark messages per peer (default 1000), then
// send() waits (a slow worker is waited for, never dropped), and since one socket serves every
// worker, a worker that stops reading holds back the sends queued behind it to the others too.
// close() is immediate (linger 0): what ZeroMQ still queues is dropped. An open end keeps Node's
// event loop alive, like a net.Server.
//
// The pieces: op_stream_frame.ts (the header), op_stream_socket.ts (what both ends share),
// op_stream_server.ts and op_stream_client.ts.
export { OpStreamServer, type OpStreamServerOptions } from './op_stream_server.js';
export { OpStreamClient, type OpStreamClientOptions } from './op_stream_client.js';
export { OP_STREAM_KEY_BYTES, newOpStreamKey, type OpStreamSocketOptions } from './op_stream_socket.js';
export type { OpStreamReject } from './op_stream_frame.js';
