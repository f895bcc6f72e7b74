// safetensors files (https://huggingface.co/docs/safetensors): a validating, mmap-backed reader
// (header sizes, offsets, overlaps and the end of file checked before anything is trusted), a
// sharded-checkpoint index reader (*.safetensors.index.json), and a crash-safe streaming writer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engram/base/dtype.h"
#include "engram/base/file.h"

namespace engram::format {

enum class StDType : uint8_t {
  kF64,
  kF32,
  kF16,
  kBF16,
  kI64,
  kI32,
  kI16,
  kI8,
  kU8,
  kBool,
  kF8E4M3,
  kF8E5M2,
  kF8E8M0,
  kU16,
  kU32,
  kU64
};
const char* StDTypeName(StDType t) noexcept;  // "F32", "BF16", ...
uint32_t StDTypeSize(StDType t) noexcept;
// The safetensors dtype that stores rows of a table dtype (fp8 rows: F8_E4M3, scales F8_E8M0).
StDType StDTypeOf(base::DType t) noexcept;
// A tensor name pattern with "{layer}" replaced by the layer id (checkpoints keep one Engram
// tensor per layer, e.g. "model.layers.{layer}.engram.table.weight").
std::string TensorNameFor(const std::string& pattern, uint32_t layer_id);

struct TensorInfo {
  std::string name;
  StDType dtype = StDType::kF32;
  std::vector<uint64_t> shape;
  uint64_t begin = 0;  // offsets relative to the data area
  uint64_t end = 0;
  uint64_t numel() const noexcept;
};

class SafetensorsFile {
 public:
  // Throws kIo or kCorrupt (naming the file and the bad field).
  static std::unique_ptr<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const noexcept { return path_; }
  const std::vector<TensorInfo>& tensors() const noexcept { return tensors_; }
  const TensorInfo* Find(const std::string& name) const noexcept;
  // The bytes of a tensor; valid while this object lives. Touching them maps the pages (RSS).
  std::span<const uint8_t> Data(const TensorInfo& t) const noexcept;
  // Copies n bytes at `offset` inside a tensor with pread (no mapping: bounded RSS for huge files).
  void ReadRange(const TensorInfo& t, uint64_t offset, void* out, size_t n) const;
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  const base::MappedFile& mapping() const noexcept { return map_; }
  uint64_t data_offset() const noexcept { return data_offset_; }

 private:
  std::string path_;
  base::MappedFile map_;
  base::UniqueFd fd_;
  uint64_t data_offset_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint that is one .safetensors file or a directory/index of shards. Looks tensors up
// across shards; opens each shard on first use.
class Checkpoint {
 public:
  // `path` is a .safetensors file, a *.safetensors.index.json, or a directory holding either
  // model.safetensors or model.safetensors.index.json.
  static std::unique_ptr<Checkpoint> Open(const std::string& path);
  // The tensor and the shard holding it; throws kInvalidArgument naming the tensor (with the
  // closest names) when absent.
  std::pair<const SafetensorsFile*, const TensorInfo*> Get(const std::string& name) const;
  bool Has(const std::string& name) const;
  std::vector<std::string> TensorNames() const;

 private:
  std::string dir_;
  std::map<std::string, std::string> weight_map_;  // tensor -> shard file
  mutable std::map<std::string, std::unique_ptr<SafetensorsFile>> shards_;
};

// Streams tensors into "<path>.tmp.<pid>" and renames it onto path at Finish().
class SafetensorsWriter {
 public:
  struct Spec {
    std::string name;
    StDType dtype;
    std::vector<uint64_t> shape;
  };
  // All tensors are declared up front (the header comes first in the file).
  SafetensorsWriter(std::string path, std::vector<Spec> specs,
                    std::map<std::string, std::string> metadata = {});
  ~SafetensorsWriter();
  // Writes `bytes` at byte `offset` inside tensor `index` (any order, any number of calls).
  void Write(size_t index, uint64_t offset, const void* bytes, size_t n);
  void Finish();

 private:
  std::string path_;
  std::unique_ptr<base::TempFile> temp_;
  std::vector<uint64_t> starts_;
  std::vector<uint64_t> sizes_;
  uint64_t data_offset_ = 0;
};

}  // namespace engram::format
