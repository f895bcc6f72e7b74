// The addressing of an Engram table: which bucket of which sub-table every n-gram reads, in
// both modes (native XXH3 + power-of-two mask; DeepSeek-compatible multiply-XOR mod prime).
// Normative definition: schemas/table_format.md §4.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace engram::hash {

// On-disk codes; never renumber.
enum class AddressingMode : uint32_t { kNative = 0, kDeepSeek = 1 };
std::string_view AddressingName(AddressingMode m) noexcept;  // "native", "deepseek"

inline constexpr uint32_t kMinOrder = 2;
inline constexpr uint32_t kMaxOrder = 8;  // orders 2..8 at most
inline constexpr uint32_t kMaxHeads = 64;
inline constexpr uint32_t kMaxLayers = 256;
inline constexpr uint32_t kMaxLog2Buckets = 40;

// Everything needed to turn canonical token ids into bucket ids. The user-facing parameters
// come first; Derive() fills the derived ones, which tables store so that no reader re-derives.
struct AddressSpec {
  AddressingMode mode = AddressingMode::kNative;
  // native: the table seed; deepseek: the `seed` term of default_rng(seed + 10007 * layer_id).
  uint64_t seed = 0;
  std::vector<uint32_t> layer_ids;  // the model layers carrying an Engram branch
  uint32_t max_order = 3;           // N: orders 2..N
  uint32_t n_heads = 8;             // hash heads per order
  uint32_t pad_id = 0;              // canonical id that pads missing history
  uint32_t canonical_vocab = 0;     // number of canonical ids (deepseek: sets the multiplier bound)
  uint32_t log2_buckets = 20;       // native: buckets per sub-table = 2^log2_buckets
  std::vector<uint64_t> base_sizes;  // deepseek: per order 2..N, primes are searched above it

  // Derived: deepseek multipliers [layer][k] for k < max_order (empty in native mode).
  std::vector<int64_t> multipliers;
  // Derived: buckets per sub-table, index SubIndex(layer, order, head).
  std::vector<uint64_t> sizes;
  // Derived: native hash seed per sub-table (empty in deepseek mode).
  std::vector<uint64_t> seeds;

  size_t n_layers() const noexcept { return layer_ids.size(); }
  uint32_t n_orders() const noexcept { return max_order - 1; }
  // Sub-tables per layer.
  size_t per_layer() const noexcept { return static_cast<size_t>(n_orders()) * n_heads; }
  size_t n_subtables() const noexcept { return n_layers() * per_layer(); }
  // Index of sub-table (layer_index, order, head); layer_index is the position in layer_ids.
  size_t SubIndex(size_t layer_index, uint32_t order, uint32_t head) const noexcept {
    return layer_index * per_layer() + static_cast<size_t>(order - kMinOrder) * n_heads + head;
  }
};

// Checks the user-facing parameters (throws kInvalidArgument naming the field and the fix) and
// fills the derived ones.
void Derive(AddressSpec* spec);

// Checks that the derived fields are consistent with the parameters (used when reading a table:
// throws kCorrupt naming the first mismatch).
void CheckDerived(const AddressSpec& spec);

// half_bound of the reference: max(1, (INT64_MAX / canonical_vocab) / 2).
int64_t DeepSeekHalfBound(uint32_t canonical_vocab) noexcept;
// Multipliers 2r+1 for one layer: r = default_rng(seed + 10007*layer_id).integers(0, half_bound,
// N).
std::vector<int64_t> DeepSeekMultipliers(uint64_t seed, uint32_t layer_id, uint32_t max_order,
                                         uint32_t canonical_vocab);

bool IsPrime(uint64_t n) noexcept;

// Buckets of one document for one layer. ids are canonical ids; missing history before the
// document start reads pad_id. out receives ids.size() * per_layer() bucket ids laid out
// [position][order - 2][head].
void ComputeBuckets(const AddressSpec& spec, size_t layer_index, std::span<const uint32_t> ids,
                    uint64_t* out) noexcept;

// Bucket of one n-gram (ids = its n canonical ids, oldest first) in one sub-table.
uint64_t BucketOf(const AddressSpec& spec, size_t layer_index, uint32_t order, uint32_t head,
                  const uint32_t* ngram) noexcept;

// Fills `ngram` (max_order entries, oldest first) with the n-gram of order n ending at position
// t of ids (pad before the start) and returns a pointer to its first id.
const uint32_t* NgramAt(const AddressSpec& spec, std::span<const uint32_t> ids, size_t t,
                        uint32_t n, uint32_t* scratch) noexcept;

}  // namespace engram::hash
