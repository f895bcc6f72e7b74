// safetensors parsing with every field checked against the file before use.
#include "engram/format/safetensors.h"

#include <fcntl.h>

#include <algorithm>
#include <cstring>

#include "engram/base/checked.h"
#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/base/json.h"

namespace engram::format {

namespace {
constexpr uint64_t kMaxHeader = 100ull << 20;  // the format's own limit is 100 MB
constexpr size_t kMaxDims = 16;

struct DTypeRow {
  StDType t;
  const char* name;
  uint32_t size;
};
const DTypeRow kDTypes[] = {
    {StDType::kF64, "F64", 8},        {StDType::kF32, "F32", 4},
    {StDType::kF16, "F16", 2},        {StDType::kBF16, "BF16", 2},
    {StDType::kI64, "I64", 8},        {StDType::kI32, "I32", 4},
    {StDType::kI16, "I16", 2},        {StDType::kI8, "I8", 1},
    {StDType::kU8, "U8", 1},          {StDType::kBool, "BOOL", 1},
    {StDType::kF8E4M3, "F8_E4M3", 1}, {StDType::kF8E5M2, "F8_E5M2", 1},
    {StDType::kF8E8M0, "F8_E8M0", 1}, {StDType::kU16, "U16", 2},
    {StDType::kU32, "U32", 4},        {StDType::kU64, "U64", 8},
};
}  // namespace

const char* StDTypeName(StDType t) noexcept {
  for (const auto& r : kDTypes)
    if (r.t == t) return r.name;
  return "?";
}
uint32_t StDTypeSize(StDType t) noexcept {
  for (const auto& r : kDTypes)
    if (r.t == t) return r.size;
  return 0;
}

uint64_t TensorInfo::numel() const noexcept {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  auto f = std::make_unique<SafetensorsFile>();
  f->path_ = path;
  f->map_ = base::MappedFile::Open(path);
  f->fd_ = base::OpenFile(path, O_RDONLY);
  const uint64_t size = f->map_.size();
  ENGRAM_CHECK(size >= 8, Code::kCorrupt,
               path << ": truncated: " << size << " bytes, a safetensors file needs at least 8");
  uint64_t hlen = base::LoadLE<uint64_t>(f->map_.data());
  ENGRAM_CHECK(hlen <= kMaxHeader, Code::kCorrupt,
               path << ": header length " << hlen
                    << " exceeds the format's 100 MB limit; not a safetensors file");
  ENGRAM_CHECK(hlen <= size - 8, Code::kCorrupt,
               path << ": header length " << hlen << " runs past the end of the " << size
                    << "-byte file (truncated?)");
  std::string_view text(reinterpret_cast<const char*>(f->map_.data() + 8), hlen);
  base::Json root = base::Json::Parse(text, path + " header", 16);
  ENGRAM_CHECK(root.is_object(), Code::kCorrupt, path << ": header is not a JSON object");
  f->data_offset_ = 8 + hlen;
  const uint64_t data_size = size - f->data_offset_;
  for (const auto& [name, v] : root.members()) {
    if (name == "__metadata__") {
      ENGRAM_CHECK(v.is_object(), Code::kCorrupt,
                   path << ": __metadata__ must be an object of strings");
      for (const auto& [k, mv] : v.members()) {
        ENGRAM_CHECK(mv.is_string(), Code::kCorrupt,
                     path << ": __metadata__[\"" << k << "\"] is not a string");
        f->metadata_[k] = mv.as_string();
      }
      continue;
    }
    ENGRAM_CHECK(v.is_object(), Code::kCorrupt,
                 path << ": tensor \"" << name << "\" is not an object");
    TensorInfo t;
    t.name = name;
    const base::Json* dt = v.Find("dtype");
    const base::Json* shape = v.Find("shape");
    const base::Json* offs = v.Find("data_offsets");
    ENGRAM_CHECK(dt && dt->is_string() && shape && shape->is_array() && offs && offs->is_array() &&
                     offs->items().size() == 2,
                 Code::kCorrupt,
                 path << ": tensor \"" << name << "\" needs dtype, shape and data_offsets");
    bool known = false;
    uint32_t esize = 0;
    for (const auto& r : kDTypes)
      if (dt->as_string() == r.name) {
        t.dtype = r.t;
        esize = r.size;
        known = true;
      }
    ENGRAM_CHECK(known, Code::kCorrupt,
                 path << ": tensor \"" << name << "\" has unknown dtype " << dt->as_string());
    ENGRAM_CHECK(shape->items().size() <= kMaxDims, Code::kCorrupt,
                 path << ": tensor \"" << name << "\" has too many dims");
    uint64_t numel = 1;
    for (const auto& d : shape->items()) {
      auto dv = d.as_uint64();
      ENGRAM_CHECK(dv.has_value(), Code::kCorrupt,
                   path << ": tensor \"" << name << "\" has a bad shape entry");
      t.shape.push_back(*dv);
      auto m = base::CheckedMul(numel, *dv);
      ENGRAM_CHECK(m.has_value(), Code::kCorrupt,
                   path << ": tensor \"" << name << "\" shape overflows");
      numel = *m;
    }
    auto b = offs->items()[0].as_uint64();
    auto e = offs->items()[1].as_uint64();
    ENGRAM_CHECK(b && e && *b <= *e, Code::kCorrupt,
                 path << ": tensor \"" << name << "\" has bad data_offsets");
    t.begin = *b;
    t.end = *e;
    auto bytes = base::CheckedMul(numel, esize);
    ENGRAM_CHECK(bytes && *bytes == t.end - t.begin, Code::kCorrupt,
                 path << ": tensor \"" << name << "\" spans " << t.end - t.begin
                      << " bytes but its shape and dtype need " << (bytes ? *bytes : 0));
    ENGRAM_CHECK(t.end <= data_size, Code::kCorrupt,
                 path << ": tensor \"" << name << "\" ends at " << t.end << ", past the "
                      << data_size << "-byte data area (truncated file?)");
    f->tensors_.push_back(std::move(t));
  }
  std::vector<const TensorInfo*> sorted;
  for (const auto& t : f->tensors_) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < sorted.size(); ++i)
    ENGRAM_CHECK(sorted[i - 1]->end <= sorted[i]->begin, Code::kCorrupt,
                 path << ": tensors \"" << sorted[i - 1]->name << "\" and \"" << sorted[i]->name
                      << "\" overlap");
  return f;
}

const TensorInfo* SafetensorsFile::Find(const std::string& name) const noexcept {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

void SafetensorsFile::ReadRange(const TensorInfo& t, uint64_t offset, void* out, size_t n) const {
  ENGRAM_CHECK(offset <= t.end - t.begin && n <= t.end - t.begin - offset, Code::kInternal,
               "read outside tensor");
  base::PreadFull(fd_.get(), out, n, data_offset_ + t.begin + offset, path_);
}

std::span<const uint8_t> SafetensorsFile::Data(const TensorInfo& t) const noexcept {
  return {map_.data() + data_offset_ + t.begin, static_cast<size_t>(t.end - t.begin)};
}

std::unique_ptr<Checkpoint> Checkpoint::Open(const std::string& path) {
  auto c = std::make_unique<Checkpoint>();
  std::string p = path;
  auto ends_with = [](const std::string& s, const std::string& suf) {
    return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (!ends_with(p, ".json") && !ends_with(p, ".safetensors")) {
    if (base::PathExists(p + "/model.safetensors.index.json"))
      p += "/model.safetensors.index.json";
    else if (base::PathExists(p + "/model.safetensors"))
      p += "/model.safetensors";
    else
      ENGRAM_THROW(Code::kInvalidArgument,
                   path << ": no model.safetensors or model.safetensors.index.json there; "
                           "give a .safetensors file, an index .json or a model directory");
  }
  c->dir_ = base::DirName(p);
  if (ends_with(p, ".json")) {
    std::string text = base::ReadFileToString(p, 256ull << 20);
    base::Json root = base::Json::Parse(text, p, 16);
    const base::Json* wm = root.Find("weight_map");
    ENGRAM_CHECK(wm && wm->is_object(), Code::kCorrupt,
                 p << ": no \"weight_map\" object; not a safetensors index");
    for (const auto& [name, file] : wm->members()) {
      ENGRAM_CHECK(
          file.is_string() && !file.as_string().empty() &&
              file.as_string().find('/') == std::string::npos && file.as_string() != "..",
          Code::kCorrupt,
          p << ": weight_map[\"" << name << "\"] must name a shard file in the same directory");
      c->weight_map_[name] = file.as_string();
    }
  } else {
    auto f = SafetensorsFile::Open(p);
    std::string shard =
        p.substr(p.find_last_of('/') == std::string::npos ? 0 : p.find_last_of('/') + 1);
    for (const auto& t : f->tensors()) c->weight_map_[t.name] = shard;
    c->shards_[shard] = std::move(f);
  }
  return c;
}

bool Checkpoint::Has(const std::string& name) const { return weight_map_.count(name) != 0; }

std::vector<std::string> Checkpoint::TensorNames() const {
  std::vector<std::string> v;
  for (const auto& [k, _] : weight_map_) v.push_back(k);
  return v;
}

std::pair<const SafetensorsFile*, const TensorInfo*> Checkpoint::Get(
    const std::string& name) const {
  auto it = weight_map_.find(name);
  if (it == weight_map_.end()) {
    std::string near;
    for (const auto& [k, _] : weight_map_)
      if (k.find(name.substr(
              name.find_last_of('.') == std::string::npos ? 0 : name.find_last_of('.') + 1)) !=
          std::string::npos) {
        near += (near.empty() ? "" : ", ") + k;
        if (near.size() > 200) break;
      }
    ENGRAM_THROW(Code::kInvalidArgument, "checkpoint has no tensor \""
                                             << name << "\""
                                             << (near.empty() ? "" : "; similar: " + near));
  }
  auto& shard = shards_[it->second];
  if (!shard) shard = SafetensorsFile::Open(dir_ + "/" + it->second);
  const TensorInfo* t = shard->Find(name);
  ENGRAM_CHECK(t != nullptr, Code::kCorrupt,
               "checkpoint index says \"" << name << "\" is in " << it->second
                                          << ", but that shard does not hold it");
  return {shard.get(), t};
}

SafetensorsWriter::SafetensorsWriter(std::string path, std::vector<Spec> specs,
                                     std::map<std::string, std::string> metadata)
    : path_(std::move(path)) {
  std::string json = "{";
  bool first = true;
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool f2 = true;
    for (const auto& [k, v] : metadata) {
      json += (f2 ? "" : ",") + base::JsonString(k) + ":" + base::JsonString(v);
      f2 = false;
    }
    json += "}";
    first = false;
  }
  uint64_t at = 0;
  for (const auto& s : specs) {
    uint64_t n = StDTypeSize(s.dtype);
    for (uint64_t d : s.shape) n *= d;
    starts_.push_back(at);
    sizes_.push_back(n);
    json += (first ? "" : ",") + base::JsonString(s.name) + ":{\"dtype\":\"" +
            StDTypeName(s.dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < s.shape.size(); ++i) json += (i ? "," : "") + std::to_string(s.shape[i]);
    json += "],\"data_offsets\":[" + std::to_string(at) + "," + std::to_string(at + n) + "]}";
    at += n;
    first = false;
  }
  json += "}";
  while ((8 + json.size()) % 8) json.push_back(' ');  // data aligned to 8 bytes
  temp_ = std::make_unique<base::TempFile>(path_);
  data_offset_ = 8 + json.size();
  uint8_t len[8];
  base::StoreLE<uint64_t>(len, json.size());
  base::PwriteFull(temp_->fd(), len, 8, 0, temp_->temp_path());
  base::PwriteFull(temp_->fd(), json.data(), json.size(), 8, temp_->temp_path());
  base::Truncate(temp_->fd(), data_offset_ + at, temp_->temp_path());
}

SafetensorsWriter::~SafetensorsWriter() = default;

void SafetensorsWriter::Write(size_t index, uint64_t offset, const void* bytes, size_t n) {
  ENGRAM_CHECK(index < sizes_.size() && offset <= sizes_[index] && n <= sizes_[index] - offset,
               Code::kInternal, "safetensors write out of the tensor's range");
  base::PwriteFull(temp_->fd(), bytes, n, data_offset_ + starts_[index] + offset,
                   temp_->temp_path());
}

void SafetensorsWriter::Finish() { temp_->Commit(); }

StDType StDTypeOf(base::DType t) noexcept {
  switch (t) {
    case base::DType::kF32:
      return StDType::kF32;
    case base::DType::kBF16:
      return StDType::kBF16;
    case base::DType::kF16:
      return StDType::kF16;
    case base::DType::kF8E4M3:
      return StDType::kF8E4M3;
    case base::DType::kI8:
      return StDType::kI8;
    case base::DType::kI4:
      return StDType::kU8;  // two values a byte
  }
  return StDType::kF32;
}

std::string TensorNameFor(const std::string& pattern, uint32_t layer_id) {
  std::string s = pattern;
  size_t p = s.find("{layer}");
  if (p != std::string::npos) s.replace(p, 7, std::to_string(layer_id));
  return s;
}

}  // namespace engram::format
