// CUDA implementations of kernels/engram_kernels.h.
#include <cuda_runtime.h>

#include <cstring>
#include <vector>

#include "engram/base/dtype.h"
#include "engram/base/error.h"
#include "engram/hash/ngram_hash.h"
#include "engram/hash/xxh3_short.h"
#include "engram_kernels.h"

#define ENGRAM_CUDA_CHECK(expr)                                                     \
  do {                                                                              \
    cudaError_t engram_cuda_err_ = (expr);                                          \
    ENGRAM_CHECK(engram_cuda_err_ == cudaSuccess, ::engram::Code::kCuda,            \
                 #expr << " failed: " << cudaGetErrorName(engram_cuda_err_) << ": " \
                       << cudaGetErrorString(engram_cuda_err_));                    \
  } while (0)

namespace engram::kernels {

namespace {

__constant__ uint8_t c_secret[192];

__device__ __forceinline__ void Window(const uint32_t* ids, int64_t t, uint32_t N, uint32_t pad,
                                       uint32_t* w) {
  for (uint32_t k = 0; k < N; ++k) {
    int64_t i = t - static_cast<int64_t>(N - 1) + k;
    w[k] = i < 0 ? pad : ids[i];
  }
}

__global__ void NativeHashKernel(const uint32_t* ids, size_t T, uint32_t N, uint32_t heads,
                                 const uint64_t* seeds, uint64_t mask, uint32_t pad,
                                 uint64_t* out) {
  size_t t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (t >= T) return;
  uint32_t w[hash::kMaxOrder];
  Window(ids, static_cast<int64_t>(t), N, pad, w);
  const size_t per = static_cast<size_t>(N - 1) * heads;
  for (uint32_t n = 2; n <= N; ++n) {
    const uint8_t* g = reinterpret_cast<const uint8_t*>(w + N - n);
    for (uint32_t h = 0; h < heads; ++h)
      out[t * per + (n - 2) * heads + h] =
          hash::xxh3::Hash4To32(g, 4 * n, seeds[(n - 2) * heads + h], c_secret) & mask;
  }
}

__global__ void DeepSeekHashKernel(const uint32_t* ids, size_t T, uint32_t N, uint32_t heads,
                                   const int64_t* mult, const uint64_t* sizes, uint32_t pad,
                                   uint64_t* out) {
  size_t t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
  if (t >= T) return;
  uint32_t w[hash::kMaxOrder];
  Window(ids, static_cast<int64_t>(t), N, pad, w);
  const size_t per = static_cast<size_t>(N - 1) * heads;
  uint64_t mix = static_cast<uint64_t>(w[N - 1]) * static_cast<uint64_t>(mult[0]);
  for (uint32_t n = 2; n <= N; ++n) {
    mix ^= static_cast<uint64_t>(w[N - n]) * static_cast<uint64_t>(mult[n - 1]);
    const int64_t m = static_cast<int64_t>(mix);
    for (uint32_t h = 0; h < heads; ++h) {
      const int64_t p = static_cast<int64_t>(sizes[(n - 2) * heads + h]);
      int64_t r = m % p;
      out[t * per + (n - 2) * heads + h] = static_cast<uint64_t>(r < 0 ? r + p : r);
    }
  }
}

__device__ __forceinline__ float E4M3ToFloat(uint8_t q) {
  const int sign = q & 0x80, exp = (q >> 3) & 0xF, mant = q & 7;
  float v;
  if (exp == 15 && mant == 7)
    v = __int_as_float(0x7FC00000);
  else if (exp == 0)
    v = ldexpf(static_cast<float>(mant), -9);
  else
    v = ldexpf(1.0f + mant / 8.0f, exp - 7);
  return sign ? -v : v;
}

__device__ __forceinline__ float E8M0ToFloat(uint8_t e) {
  if (e == 0xFF) return __int_as_float(0x7FC00000);
  if (e == 0) return __int_as_float(0x00400000);
  return __int_as_float(static_cast<uint32_t>(e) << 23);
}

__device__ __forceinline__ float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu,
                 mant = h & 0x3FFu;
  if (exp == 0) {
    float v = mant * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (exp == 31) return __int_as_float(sign | 0x7F800000u | (mant << 13));
  return __int_as_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

__device__ __forceinline__ uint16_t FloatToBF16(float f) {
  uint32_t b = __float_as_uint(f);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);
  b += 0x7FFFu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

__device__ __forceinline__ float Decode(uint32_t dtype, const uint8_t* p, float scale) {
  switch (dtype) {
    case 0:
      return __uint_as_float(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                             static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24);
    case 1:
      return __uint_as_float(static_cast<uint32_t>(p[0] | p[1] << 8) << 16);
    case 2:
      return HalfToFloat(static_cast<uint16_t>(p[0] | p[1] << 8));
    default:
      return E4M3ToFloat(p[0]) * scale;
  }
}

// Value j of a row of any dtype (dtype codes as base::DType), with the row's scales.
__device__ __forceinline__ float DecodeAt(uint32_t dtype, uint32_t dsize, const uint8_t* row,
                                          const uint8_t* sc, uint32_t j) {
  switch (dtype) {
    case 4: {  // int8: one f32 scale per row
      const float s = __uint_as_float(static_cast<uint32_t>(sc[0]) | sc[1] << 8 | sc[2] << 16 |
                                      static_cast<uint32_t>(sc[3]) << 24);
      return static_cast<float>(static_cast<int8_t>(row[j])) * s;
    }
    case 5: {  // int4: one f16 scale per 32 values, value 2i in the low nibble of byte i
      const uint8_t b = row[j / 2];
      const int nib = j % 2 ? b >> 4 : b & 0x0F;
      const uint32_t k = 2 * (j / 32);
      return static_cast<float>(nib - 8) *
             HalfToFloat(static_cast<uint16_t>(sc[k] | sc[k + 1] << 8));
    }
    default:
      return Decode(dtype, row + j * dsize, sc ? E8M0ToFloat(sc[j / 32]) : 1.0f);
  }
}

// One warp per row. Each lane loads 16-byte chunks of the row (wide reads matter over the bus for
// zero-copy), decodes them, and writes f32 or bf16. row_stride must be a multiple of 16 and the
// rows base 16-byte aligned; GatherNarrowKernel handles the rest.
__global__ void GatherKernel(const uint8_t* rows_base, const uint8_t* scales_base, uint32_t dtype,
                             uint32_t dsize, uint32_t row_dim, uint32_t row_stride,
                             uint32_t scale_stride, const uint64_t* rows, size_t n, float* out_f32,
                             uint16_t* out_bf16) {
  const size_t warp = (blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x) / 32;
  const uint32_t lane = threadIdx.x % 32;
  if (warp >= n) return;
  const uint64_t r = rows[warp];
  const uint4* src = reinterpret_cast<const uint4*>(rows_base + r * row_stride);
  const uint8_t* sc = scales_base ? scales_base + r * scale_stride : nullptr;
  const uint32_t per_chunk = 16 / dsize, chunks = row_stride / 16;
  for (uint32_t c = lane; c < chunks; c += 32) {
    uint4 q = __ldg(src + c);
    const uint8_t* qb = reinterpret_cast<const uint8_t*>(&q);
    const uint32_t j0 = c * per_chunk;
    const float scale =
        sc ? E8M0ToFloat(sc[j0 / 32]) : 1.0f;  // 16 fp8 values never straddle a block
    for (uint32_t u = 0; u < per_chunk; ++u) {
      const float v = Decode(dtype, qb + u * dsize, scale);
      if (out_bf16)
        out_bf16[warp * row_dim + j0 + u] = FloatToBF16(v);
      else
        out_f32[warp * row_dim + j0 + u] = v;
    }
  }
}

__global__ void GatherNarrowKernel(const uint8_t* rows_base, const uint8_t* scales_base,
                                   uint32_t dtype, uint32_t dsize, uint32_t row_dim,
                                   uint32_t row_stride, uint32_t scale_stride, const uint64_t* rows,
                                   size_t n, float* out_f32, uint16_t* out_bf16) {
  const size_t warp = (blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x) / 32;
  const uint32_t lane = threadIdx.x % 32;
  if (warp >= n) return;
  const uint64_t r = rows[warp];
  const uint8_t* src = rows_base + r * row_stride;
  const uint8_t* sc = scales_base ? scales_base + r * scale_stride : nullptr;
  for (uint32_t j = lane; j < row_dim; j += 32) {
    const float v = DecodeAt(dtype, dsize, src, sc, j);
    if (out_bf16)
      out_bf16[warp * row_dim + j] = FloatToBF16(v);
    else
      out_f32[warp * row_dim + j] = v;
  }
}

// One block per token: three reductions (sum k^2, sum h^2, sum k h wk wq), then the scaled v.
__global__ void GateKernel(const float* k, const float* h, const float* wk, const float* wq,
                           const float* v, float* out, size_t d, float eps) {
  extern __shared__ float sh[];
  const size_t t = blockIdx.x;
  const float* kt = k + t * d;
  const float* ht = h + t * d;
  float sk = 0, shh = 0, dot = 0;
  for (size_t i = threadIdx.x; i < d; i += blockDim.x) {
    sk += kt[i] * kt[i];
    shh += ht[i] * ht[i];
    dot += kt[i] * wk[i] * ht[i] * wq[i];
  }
  float* a = sh;
  float* b = sh + blockDim.x;
  float* c = sh + 2 * blockDim.x;
  a[threadIdx.x] = sk;
  b[threadIdx.x] = shh;
  c[threadIdx.x] = dot;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      a[threadIdx.x] += a[threadIdx.x + s];
      b[threadIdx.x] += b[threadIdx.x + s];
      c[threadIdx.x] += c[threadIdx.x + s];
    }
    __syncthreads();
  }
  const float rk = rsqrtf(a[0] / d + eps), rh = rsqrtf(b[0] / d + eps);
  float g = c[0] * rk * rh / sqrtf(static_cast<float>(d));
  if (g != 0.0f) g = copysignf(sqrtf(fmaxf(fabsf(g), 1e-6f)), g);
  const float alpha = 1.0f / (1.0f + expf(-g));
  for (size_t i = threadIdx.x; i < d; i += blockDim.x) out[t * d + i] = alpha * v[t * d + i];
}

}  // namespace

bool DeviceAvailable(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA driver: ") + cudaGetErrorString(e);
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device";
    return false;
  }
  return true;
}

std::string DeviceName(int device) {
  cudaDeviceProp p;
  ENGRAM_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  return p.name;
}

bool HostRegisterReadOnlySupported(int device) {
  int v = 0;
  ENGRAM_CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrHostRegisterReadOnlySupported, device));
  return v != 0;
}

void* DeviceAlloc(size_t bytes) {
  void* p = nullptr;
  ENGRAM_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}
void DeviceFree(void* p) noexcept { cudaFree(p); }
void CopyToDevice(void* dst, const void* src, size_t n) {
  ENGRAM_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
}
void CopyToHost(void* dst, const void* src, size_t n) {
  ENGRAM_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}
void Synchronize() { ENGRAM_CUDA_CHECK(cudaDeviceSynchronize()); }
void* PinnedAlloc(size_t bytes) {
  void* p = nullptr;
  ENGRAM_CUDA_CHECK(cudaMallocHost(&p, bytes));
  return p;
}
void PinnedFree(void* p) noexcept { cudaFreeHost(p); }

struct DeviceAddressing::Impl {
  hash::AddressSpec spec;
  uint64_t* seeds = nullptr;  // native, all sub-tables
  int64_t* mult = nullptr;    // deepseek, [layer][k]
  uint64_t* sizes = nullptr;  // all sub-tables
  ~Impl() {
    cudaFree(seeds);
    cudaFree(mult);
    cudaFree(sizes);
  }
};

DeviceAddressing::DeviceAddressing(const hash::AddressSpec& spec)
    : impl_(std::make_unique<Impl>()) {
  impl_->spec = spec;
  ENGRAM_CUDA_CHECK(cudaMemcpyToSymbol(c_secret, hash::Xxh3Secret(), 192));
  auto upload = [](const auto& v, auto** dst) {
    if (v.empty()) return;
    ENGRAM_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(dst), v.size() * sizeof(v[0])));
    ENGRAM_CUDA_CHECK(cudaMemcpy(*dst, v.data(), v.size() * sizeof(v[0]), cudaMemcpyHostToDevice));
  };
  upload(spec.seeds, &impl_->seeds);
  upload(spec.multipliers, &impl_->mult);
  upload(spec.sizes, &impl_->sizes);
}

DeviceAddressing::~DeviceAddressing() = default;

void DeviceAddressing::ComputeBuckets(size_t li, const uint32_t* ids, size_t T, uint64_t* out) {
  const hash::AddressSpec& s = impl_->spec;
  if (T == 0) return;
  const unsigned block = 128, grid = static_cast<unsigned>((T + block - 1) / block);
  const size_t base = li * s.per_layer();
  if (s.mode == hash::AddressingMode::kNative)
    NativeHashKernel<<<grid, block>>>(ids, T, s.max_order, s.n_heads, impl_->seeds + base,
                                      (uint64_t{1} << s.log2_buckets) - 1, s.pad_id, out);
  else
    DeepSeekHashKernel<<<grid, block>>>(ids, T, s.max_order, s.n_heads,
                                        impl_->mult + li * s.max_order, impl_->sizes + base,
                                        s.pad_id, out);
  ENGRAM_CUDA_CHECK(cudaGetLastError());
}

struct DeviceRows::Impl {
  const format::Reader* reader = nullptr;
  const uint8_t* rows = nullptr;  // device-visible pointers
  const uint8_t* scales = nullptr;
  void* registered = nullptr;  // host mapping registered with cudaHostRegister
  void* pinned = nullptr;      // pinned host copy (cudaHostAlloc, mapped)
  void* device_copy = nullptr;
  ~Impl() {
    if (registered) cudaHostUnregister(registered);
    if (pinned) cudaFreeHost(pinned);
    if (device_copy) cudaFree(device_copy);
  }
};

DeviceRows::DeviceRows(const format::Reader& reader, Where where)
    : impl_(std::make_unique<Impl>()) {
  impl_->reader = &reader;
  const format::Layout& l = reader.layout();
  const uint8_t* host_rows = reader.RowBytes(0);
  const uint8_t* host_scales = reader.ScaleBytes(0);
  const uint64_t rows_bytes = l.rows_bytes(), scale_bytes = l.total_rows * l.scale_stride();
  switch (where) {
    case Where::kHostRegistered: {
      ENGRAM_CHECK(reader.mapped(), Code::kInvalidArgument,
                   "zero-copy gathers need the table mapped ([engram.table] mmap = true)");
      // The mapping is read-only: register it as such (page-aligned, whole file).
      int dev_id = 0;
      ENGRAM_CUDA_CHECK(cudaGetDevice(&dev_id));
      ENGRAM_CHECK(
          HostRegisterReadOnlySupported(dev_id), Code::kCuda,
          "GPU " << dev_id
                 << " cannot map read-only host memory (no cudaHostRegisterReadOnly support), so "
                    "the mapped table cannot be read zero-copy; gather from a pinned copy or "
                    "device memory instead");
      void* base = const_cast<uint8_t*>(reader.mapping().data());
      cudaError_t e = cudaHostRegister(
          base, reader.mapping().size(),
          cudaHostRegisterMapped | cudaHostRegisterReadOnly | cudaHostRegisterPortable);
      if (e != cudaSuccess) {
        cudaGetLastError();  // clear the error so later calls do not report it
        ENGRAM_CHECK(false, Code::kCuda,
                     reader.path()
                         << ": cannot register the mapped table with the GPU (cudaHostRegister: "
                         << cudaGetErrorName(e) << ": " << cudaGetErrorString(e)
                         << "); gather from a pinned copy or device memory instead");
      }
      impl_->registered = base;
      void* dev = nullptr;
      ENGRAM_CUDA_CHECK(cudaHostGetDevicePointer(&dev, base, 0));
      const auto* d = static_cast<const uint8_t*>(dev);
      impl_->rows = d + (host_rows - reader.mapping().data());
      if (host_scales) impl_->scales = d + (host_scales - reader.mapping().data());
      break;
    }
    case Where::kHostPinned: {
      ENGRAM_CUDA_CHECK(cudaHostAlloc(&impl_->pinned, rows_bytes + scale_bytes + 16,
                                      cudaHostAllocMapped | cudaHostAllocPortable));
      std::memcpy(impl_->pinned, host_rows, rows_bytes);
      if (scale_bytes)
        std::memcpy(static_cast<uint8_t*>(impl_->pinned) + rows_bytes, host_scales, scale_bytes);
      void* dev = nullptr;
      ENGRAM_CUDA_CHECK(cudaHostGetDevicePointer(&dev, impl_->pinned, 0));
      impl_->rows = static_cast<const uint8_t*>(dev);
      impl_->scales = scale_bytes ? impl_->rows + rows_bytes : nullptr;
      break;
    }
    case Where::kDevice: {
      ENGRAM_CUDA_CHECK(cudaMalloc(&impl_->device_copy, rows_bytes + scale_bytes + 16));
      ENGRAM_CUDA_CHECK(
          cudaMemcpy(impl_->device_copy, host_rows, rows_bytes, cudaMemcpyHostToDevice));
      if (scale_bytes)
        ENGRAM_CUDA_CHECK(cudaMemcpy(static_cast<uint8_t*>(impl_->device_copy) + rows_bytes,
                                     host_scales, scale_bytes, cudaMemcpyHostToDevice));
      impl_->rows = static_cast<const uint8_t*>(impl_->device_copy);
      impl_->scales = scale_bytes ? impl_->rows + rows_bytes : nullptr;
      break;
    }
  }
}

DeviceRows::~DeviceRows() = default;

void DeviceRows::Gather(const uint64_t* rows_dev, size_t n, void* out_dev, bool bf16_out) {
  if (n == 0) return;
  const format::Layout& l = impl_->reader->layout();
  const unsigned block = 256, grid = static_cast<unsigned>((n * 32 + block - 1) / block);
  // Bytes a value (int4: unused, DecodeAt unpacks nibbles).
  const uint32_t dsize = static_cast<uint32_t>(base::RowBytes(l.dtype, base::BlockSize(l.dtype)) /
                                               base::BlockSize(l.dtype));
  auto* f32 = bf16_out ? nullptr : static_cast<float*>(out_dev);
  auto* bf16 = bf16_out ? static_cast<uint16_t*>(out_dev) : nullptr;
  const bool wide = !base::IsIntDType(l.dtype) && l.row_stride() % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(impl_->rows) % 16 == 0;
  if (wide)
    GatherKernel<<<grid, block>>>(impl_->rows, impl_->scales, static_cast<uint32_t>(l.dtype), dsize,
                                  l.row_dim, l.row_stride(), l.scale_stride(), rows_dev, n, f32,
                                  bf16);
  else
    GatherNarrowKernel<<<grid, block>>>(impl_->rows, impl_->scales, static_cast<uint32_t>(l.dtype),
                                        dsize, l.row_dim, l.row_stride(), l.scale_stride(),
                                        rows_dev, n, f32, bf16);
  ENGRAM_CUDA_CHECK(cudaGetLastError());
}

void EngramGate(const float* k, const float* h, const float* wk, const float* wq, const float* v,
                float* out, size_t n, size_t d, float eps) {
  if (n == 0) return;
  const unsigned block = 128;
  GateKernel<<<static_cast<unsigned>(n), block, 3 * block * sizeof(float)>>>(k, h, wk, wq, v, out,
                                                                             d, eps);
  ENGRAM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace engram::kernels
