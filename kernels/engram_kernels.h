// CUDA kernels for Engram serving, behind a plain C++ API (no CUDA types): (a) n-gram hashing in
// both addressing modes, (b) row gather into device memory from a table registered in host memory
// (zero-copy) or copied to the device, dequantising fp8-e4m3+e8m0 / f16 / bf16 rows to f32,
// (c) the Engram gate. Each has a CPU counterpart in lib/ that `run` uses on CPU:
// hash::ComputeBuckets, table::GatherRowsF32, model::EngramGateCpu. Built only with
// -DENGRAM_WITH_CUDA=ON. Every failure throws engram::Error(kCuda) naming the CUDA error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engram/format/reader.h"
#include "engram/hash/addressing.h"

namespace engram::kernels {

// True when a CUDA device can be used; otherwise false and *why says why (no driver, no device).
bool DeviceAvailable(std::string* why);
std::string DeviceName(int device = 0);
// Whether the device can map host memory registered read-only (cudaHostRegisterReadOnly), which
// zero-copy gathers from the read-only table mapping need.
bool HostRegisterReadOnlySupported(int device = 0);

// Device memory owned by the caller, for tests and benchmarks.
void* DeviceAlloc(size_t bytes);
void DeviceFree(void* p) noexcept;
void CopyToDevice(void* dst, const void* src, size_t bytes);
void CopyToHost(void* dst, const void* src, size_t bytes);
void Synchronize();
// Pinned host memory (cudaMallocHost), for the memcpy baseline of the benchmark.
void* PinnedAlloc(size_t bytes);
void PinnedFree(void* p) noexcept;

// Addressing parameters of one table, uploaded once.
class DeviceAddressing {
 public:
  explicit DeviceAddressing(const hash::AddressSpec& spec);
  ~DeviceAddressing();
  DeviceAddressing(const DeviceAddressing&) = delete;
  DeviceAddressing& operator=(const DeviceAddressing&) = delete;
  // ids_dev: T canonical ids of one document (device); out_dev: [T, per_layer] bucket ids.
  void ComputeBuckets(size_t layer_index, const uint32_t* ids_dev, size_t T, uint64_t* out_dev);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A table's rows (and fp8 scales) visible to the device.
class DeviceRows {
 public:
  // kHostRegistered: the reader's read-only mapping registered with cudaHostRegister, rows read
  // zero-copy over the bus; kHostPinned: rows copied once into pinned, mapped host memory and read
  // zero-copy (for when registering the mapping is not supported); kDevice: rows copied to device
  // memory. The reader must outlive this object.
  enum class Where { kHostRegistered, kHostPinned, kDevice };
  DeviceRows(const format::Reader& reader, Where where);
  ~DeviceRows();
  DeviceRows(const DeviceRows&) = delete;
  DeviceRows& operator=(const DeviceRows&) = delete;
  // out_dev[i * row_dim + j] = value j of row rows_dev[i], as f32 (or bf16 when bf16_out).
  void Gather(const uint64_t* rows_dev, size_t n, void* out_dev, bool bf16_out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// out[t, :] = sigmoid(signed_sqrt(<RMSNorm(k[t]) * wk, RMSNorm(h[t]) * wq> / sqrt(d))) * v[t, :]
// for n tokens of width d (all device pointers, f32).
void EngramGate(const float* k, const float* h, const float* wk, const float* wq, const float* v,
                float* out, size_t n, size_t d, float eps);

}  // namespace engram::kernels
