// Journal record encoding and the committed-prefix scan (schemas/table_format.md §5).
#include "engram/format/journal.h"

#include <sys/stat.h>

#include <cstring>

#include "engram/base/checked.h"
#include "engram/base/dtype.h"
#include "engram/base/endian.h"
#include "engram/base/error.h"
#include "engram/base/file.h"
#include "engram/hash/checksum.h"

namespace engram::format {

using base::LoadLE;
using base::StoreLE;

namespace {

// XXH3 seeded with the base's header checksum over the record header (checksum field taken as
// zero) and the payload, which follow each other in `rec` (§5.1).
uint64_t RecordChecksum(uint8_t* rec, size_t header_and_payload, uint64_t seed) {
  uint8_t saved[8];
  std::memcpy(saved, rec + 24, 8);
  std::memset(rec + 24, 0, 8);
  uint64_t sum = hash::Checksum64Seeded(rec, header_and_payload, seed);
  std::memcpy(rec + 24, saved, 8);
  return sum;
}

void AppendRecord(std::basic_string<uint8_t>* out, uint32_t type, uint64_t seq, uint64_t seed,
                  const std::basic_string<uint8_t>& payload, uint64_t* checksum_out) {
  size_t at = out->size();
  size_t padded = base::AlignUp(payload.size(), 8);
  out->resize(at + kRecordHeaderSize + padded, 0);
  uint8_t* r = out->data() + at;
  StoreLE<uint32_t>(r + 0, kJournalMagic);
  StoreLE<uint32_t>(r + 4, type);
  StoreLE<uint64_t>(r + 8, seq);
  StoreLE<uint32_t>(r + 16, static_cast<uint32_t>(payload.size()));
  StoreLE<uint32_t>(r + 20, 0);
  std::memcpy(r + kRecordHeaderSize, payload.data(), payload.size());
  uint64_t sum = RecordChecksum(r, kRecordHeaderSize + payload.size(), seed);
  StoreLE<uint64_t>(r + 24, sum);
  if (checksum_out) *checksum_out = sum;
}

// Sequential reads of the journal through one large buffer: a record-by-record pread cost two
// system calls per record (most of verify's time on a journal of 100k records).
class JournalBytes {
 public:
  JournalBytes(int fd, const std::string& path, uint64_t file_length)
      : fd_(fd), path_(path), file_length_(file_length) {}
  // Bytes [pos, pos + n) of the file, valid until the next call; pos + n <= file length.
  uint8_t* At(uint64_t pos, uint64_t n) {
    if (pos < begin_ || pos + n > begin_ + size_) {
      size_ = std::min<uint64_t>(std::max<uint64_t>(n, kBlock), file_length_ - pos);
      if (buf_.size() < size_) buf_.resize(size_);
      base::PreadFull(fd_, buf_.data(), size_, pos, path_);
      begin_ = pos;
    }
    return buf_.data() + (pos - begin_);
  }

 private:
  static constexpr uint64_t kBlock = 256 << 10;  // stays in L2 while its records are checked
  int fd_;
  const std::string& path_;
  uint64_t file_length_;
  std::vector<uint8_t> buf_;
  uint64_t begin_ = 0, size_ = 0;
};

uint64_t EntryPayloadSize(const Layout& l, uint32_t order) {
  return kEntryFixedSize + base::AlignUp(uint64_t{order} * 4, 8) + l.row_stride() +
         l.scale_stride();
}

}  // namespace

void AppendEntryRecord(std::basic_string<uint8_t>* out, uint64_t seq, uint64_t seed,
                       const JournalEntry& e, const Layout& l, uint64_t* checksum_out) {
  base::ByteWriter w;
  w.Put<uint32_t>(e.layer_index);
  w.Put<uint32_t>(e.order);
  w.Put<uint32_t>(e.head);
  w.Put<uint32_t>(static_cast<uint32_t>(e.ids.size()));
  w.Put<uint64_t>(e.bucket);
  w.Put<uint32_t>(e.tag);
  w.Put<uint32_t>(0);
  for (uint32_t id : e.ids) w.Put<uint32_t>(id);
  w.PadTo(8);
  w.PutBytes(e.value.data(), e.value.size());
  ENGRAM_DCHECK(w.size() == EntryPayloadSize(l, e.order));
  (void)l;
  AppendRecord(out, kRecordEntry, seq, seed, w.bytes(), checksum_out);
}

void AppendFactRecord(std::basic_string<uint8_t>* out, uint64_t seq, uint64_t seed, const Fact& f,
                      uint64_t* checksum_out) {
  AppendRecord(out, kRecordFact, seq, seed, EncodeFact(f), checksum_out);
}

void AppendCommitRecord(std::basic_string<uint8_t>* out, uint64_t seq, uint64_t seed,
                        uint64_t first_seq, uint64_t n_entries, uint64_t created_unix,
                        uint64_t entries_digest, uint64_t* checksum_out) {
  base::ByteWriter w;
  w.Put<uint64_t>(first_seq);
  w.Put<uint64_t>(n_entries);
  w.Put<uint64_t>(created_unix);
  w.Put<uint64_t>(entries_digest);
  AppendRecord(out, kRecordCommit, seq, seed, w.bytes(), checksum_out);
}

JournalState ReadJournal(int fd, const std::string& path, const Header& h, const Layout& l,
                         uint64_t file_length, bool keep_entries) {
  JournalState st;
  st.start = h.file_size;
  st.committed_end = h.file_size;
  st.file_end = file_length;
  const uint64_t seed = h.header_checksum;
  std::vector<JournalEntry> pending;
  std::vector<Fact> pending_facts;
  uint64_t pending_fact_count = 0;
  // The batch being read: its entry count, first seq, and the digest of its record checksums
  // (streamed: a batch of 160,000 records grew a vector of sums by reallocation).
  uint64_t pending_count = 0;
  hash::Checksum64Stream pending_digest;
  uint64_t pending_first_seq = 0;
  std::vector<NonFiniteRecord> pending_non_finite;
  uint64_t pos = h.file_size;
  uint64_t seq = 0;
  JournalBytes bytes(fd, path, file_length);
  // A record that fails its checksum or is cut short may be a torn write (§5.4); a record whose
  // checksum holds but whose content is impossible was never written by append: damage.
  bool content_damage = false;
  auto stop = [&](std::string why, bool damaged = false) {
    st.tail_reason = std::move(why);
    content_damage = damaged;
  };
  while (pos < file_length) {
    if (file_length - pos < kRecordHeaderSize) {
      stop("a torn record header at offset " + std::to_string(pos));
      break;
    }
    uint8_t rh[kRecordHeaderSize];
    std::memcpy(rh, bytes.At(pos, kRecordHeaderSize), kRecordHeaderSize);
    uint32_t magic = LoadLE<uint32_t>(rh);
    uint32_t type = LoadLE<uint32_t>(rh + 4);
    uint64_t rseq = LoadLE<uint64_t>(rh + 8);
    uint32_t psize = LoadLE<uint32_t>(rh + 16);
    uint32_t reserved = LoadLE<uint32_t>(rh + 20);
    if (magic != kJournalMagic ||
        (type != kRecordEntry && type != kRecordCommit && type != kRecordFact) || reserved != 0 ||
        psize > kMaxRecordPayload) {
      stop("no valid record at offset " + std::to_string(pos));
      break;
    }
    uint64_t padded = base::AlignUp(psize, 8);
    if (file_length - pos - kRecordHeaderSize < padded) {
      stop("a torn record at offset " + std::to_string(pos));
      break;
    }
    uint8_t* rec = bytes.At(pos, kRecordHeaderSize + padded);
    uint64_t sum = RecordChecksum(rec, kRecordHeaderSize + psize, seed);
    if (sum != LoadLE<uint64_t>(rh + 24)) {
      stop("record at offset " + std::to_string(pos) + " fails its checksum");
      break;
    }
    if (rseq != seq) {
      stop("record at offset " + std::to_string(pos) + " has seq " + std::to_string(rseq) +
               ", expected " + std::to_string(seq),
           true);
      break;
    }
    bool pad_ok = true;
    for (uint64_t k = psize; k < padded; ++k) pad_ok = pad_ok && rec[kRecordHeaderSize + k] == 0;
    if (!pad_ok) {
      stop("record at offset " + std::to_string(pos) + " has non-zero padding", true);
      break;
    }
    const uint8_t* p = rec + kRecordHeaderSize;
    if (type == kRecordEntry) {
      JournalEntry e;
      e.seq = rseq;
      e.record_offset = pos;
      bool ok = psize >= kEntryFixedSize;
      if (ok) {
        e.layer_index = LoadLE<uint32_t>(p);
        e.order = LoadLE<uint32_t>(p + 4);
        e.head = LoadLE<uint32_t>(p + 8);
        uint32_t n_ids = LoadLE<uint32_t>(p + 12);
        e.bucket = LoadLE<uint64_t>(p + 16);
        e.tag = LoadLE<uint32_t>(p + 24);
        ok = LoadLE<uint32_t>(p + 28) == 0 && e.layer_index < l.spec.n_layers() &&
             e.order >= hash::kMinOrder && e.order <= l.spec.max_order && e.head < l.spec.n_heads &&
             n_ids == e.order && e.tag != 0 && psize == EntryPayloadSize(l, e.order);
        if (ok) {
          size_t sub = l.spec.SubIndex(e.layer_index, e.order, e.head);
          ok = e.bucket < l.spec.sizes[sub];
          e.row = l.RowOf(sub, e.bucket);
        }
        for (uint32_t k = 0; ok && k < n_ids; ++k)
          ok = LoadLE<uint32_t>(p + kEntryFixedSize + 4 * k) < l.spec.canonical_vocab;
        if (ok) {
          const uint8_t* v = p + kEntryFixedSize + base::AlignUp(uint64_t{n_ids} * 4, 8);
          size_t bad = base::FirstNonFinite(l.dtype, v, v + l.row_stride(), l.row_dim);
          if (bad != l.row_dim)
            pending_non_finite.push_back({pos, e.layer_index, e.order, e.head, e.bucket, bad});
        }
        if (ok && keep_entries) {
          e.ids.resize(n_ids);
          std::memcpy(e.ids.data(), p + kEntryFixedSize, n_ids * 4);
          size_t vo = kEntryFixedSize + base::AlignUp(uint64_t{n_ids} * 4, 8);
          e.value.assign(p + vo, p + vo + l.row_stride() + l.scale_stride());
        }
      }
      if (!ok) {
        stop("entry record at offset " + std::to_string(pos) +
                 " does not fit this table's layout (layer, order, head, bucket or ids)",
             true);
        break;
      }
      if (pending_count == 0) pending_first_seq = rseq;
      if (keep_entries) pending.push_back(std::move(e));
      uint8_t sum_le[8];
      StoreLE<uint64_t>(sum_le, sum);
      pending_digest.Update(sum_le, 8);
      ++pending_count;
    } else if (type == kRecordFact) {
      // §5.7: only a table with the ledger flag holds fact records; one whose checksum holds but
      // whose payload does not decode was never written by append.
      std::string why;
      Fact f;
      if (!(h.required_flags & kReqLedger)) {
        why = "a fact record in a table without the ledger flag";
      } else {
        try {
          f = DecodeFact({p, psize}, l.total_rows);
        } catch (const Error& e) {
          why = e.what();
        }
      }
      if (!why.empty()) {
        stop("fact record at offset " + std::to_string(pos) + " is not valid: " + why, true);
        break;
      }
      if (pending_count == 0) pending_first_seq = rseq;
      if (keep_entries) pending_facts.push_back(std::move(f));
      uint8_t sum_le[8];
      StoreLE<uint64_t>(sum_le, sum);
      pending_digest.Update(sum_le, 8);
      ++pending_count;
      ++pending_fact_count;
    } else {
      bool ok = psize == kCommitPayloadSize;
      uint64_t first_seq = 0, n_entries = 0, digest = 0;
      if (ok) {
        first_seq = LoadLE<uint64_t>(p);
        n_entries = LoadLE<uint64_t>(p + 8);
        digest = LoadLE<uint64_t>(p + 24);
        ok = n_entries >= 1 && n_entries == pending_count && first_seq == pending_first_seq &&
             digest == pending_digest.Digest();
      }
      if (!ok) {
        stop("commit record at offset " + std::to_string(pos) +
                 " does not match the entries before it",
             true);
        break;
      }
      for (auto& e : pending) {
        st.overlay[e.row] = static_cast<uint32_t>(st.committed.size());
        st.committed.push_back(std::move(e));
      }
      st.n_committed += pending_count - pending_fact_count;
      st.n_facts += pending_fact_count;
      for (auto& f : pending_facts) st.facts.push_back(std::move(f));
      pending_facts.clear();
      pending_fact_count = 0;
      st.non_finite.insert(st.non_finite.end(), pending_non_finite.begin(),
                           pending_non_finite.end());
      pending_non_finite.clear();
      pending.clear();
      pending_count = 0;
      pending_digest.Reset();
      st.n_commits++;
      st.committed_end = pos + kRecordHeaderSize + padded;
      st.last_commit_checksum = sum;
      st.next_seq = seq + 1;
    }
    pos += kRecordHeaderSize + padded;
    ++seq;
  }
  if (st.tail_reason.empty() && st.committed_end < file_length)
    st.tail_reason = std::to_string(pending_count) + " entry record(s) without a commit record";

  // Commit slots (§5.6): what the last completed append recorded, outside the journal.
  st.has_slots = (h.optional_flags & kOptCommitSlots) != 0;
  if (st.has_slots) {
    uint8_t sb[2 * kCommitSlotSize];
    base::PreadFull(fd, sb, sizeof sb, kCommitSlotsOffset, path);
    CommitSlot slots[2];
    bool valid[2];
    for (int i = 0; i < 2; ++i) {
      valid[i] = DecodeCommitSlot(sb + i * kCommitSlotSize, seed, &slots[i]);
      if (valid[i] && (!st.slot_valid || slots[i].n_commits > st.slot.n_commits)) {
        st.slot = slots[i];
        st.slot_valid = true;
      }
    }
    // A reader beside a writer: the file's length was taken when this view opened, and an
    // append may have committed since and written its slot. That slot describes a later state,
    // not damage: when the file has grown past this view's length to where the slot says, the
    // view is checked against the other slot (the state before that commit) if it matches,
    // and without a slot otherwise (issue 32: one verify in three beside appends said "copy the
    // table again", advice that would lose the committed entries).
    if (st.slot_valid &&
        (st.slot.n_commits > st.n_commits || st.slot.committed_end > st.committed_end)) {
      struct stat now;
      if (::fstat(fd, &now) == 0 && static_cast<uint64_t>(now.st_size) > file_length &&
          static_cast<uint64_t>(now.st_size) >= st.slot.committed_end) {
        st.slot_valid = false;
        for (int i = 0; i < 2; ++i)
          if (valid[i] && slots[i].n_commits == st.n_commits &&
              slots[i].committed_end == st.committed_end) {
            st.slot = slots[i];
            st.slot_valid = true;
          }
      }
    }
  }
  const std::string restore = "; restore the table from a copy";
  if (st.slot_valid && file_length < st.slot.committed_end) {
    st.damage_offset = file_length;
    st.damage = "the file is incomplete: it has " + std::to_string(file_length) +
                " bytes, but its commit slot records " + std::to_string(st.slot.n_commits) +
                " committed batch(es) ending at offset " + std::to_string(st.slot.committed_end) +
                " (an interrupted copy?); copy the table again from its source";
  } else if (st.slot_valid &&
             (st.n_commits < st.slot.n_commits || st.committed_end < st.slot.committed_end)) {
    st.damage_offset = st.committed_end;
    st.damage = "the journal is damaged at offset " + std::to_string(st.committed_end) + " (" +
                st.tail_reason + "): its commit slot records " + std::to_string(st.slot.n_commits) +
                " committed batch(es) ending at offset " + std::to_string(st.slot.committed_end) +
                ", only " + std::to_string(st.n_commits) + " are readable" + restore;
  } else if (st.committed_end < file_length) {
    auto stranded = FindStrandedCommits(fd, path, h, st.committed_end, file_length);
    if (!stranded.empty()) {
      st.damage_offset = st.committed_end;
      st.damage = "the journal is damaged at offset " + std::to_string(st.committed_end) + " (" +
                  st.tail_reason + "): " + std::to_string(stranded.size()) +
                  " committed batch(es) after it, from offset " + std::to_string(stranded.front()) +
                  ", are unreadable" + restore;
    } else if (content_damage) {
      st.damage_offset = st.committed_end;
      st.damage = "the journal is damaged at offset " + std::to_string(st.committed_end) + " (" +
                  st.tail_reason +
                  "): its checksum holds, so this is not a torn write but damaged or forged "
                  "data" +
                  restore;
    }
  }
  return st;
}

void RequireIntact(const JournalState& js, const std::string& path) {
  ENGRAM_CHECK(js.damage.empty(), Code::kCorrupt, path << ": " << js.damage);
}

void WriteCommitSlot(int fd, const std::string& path, const Header& h, const JournalState& before,
                     uint64_t committed_end, uint64_t n_new_entries, uint64_t commit_checksum) {
  if (!(h.optional_flags & kOptCommitSlots)) return;
  CommitSlot s;
  s.n_commits = before.n_commits + 1;
  s.committed_end = committed_end;
  s.n_entries = before.n_committed + n_new_entries;
  s.last_commit_checksum = commit_checksum;
  uint8_t b[kCommitSlotSize];
  EncodeCommitSlot(s, h.header_checksum, b);
  // Alternate by commit count, so the slot holding the previous state survives a torn write.
  base::PwriteFull(fd, b, sizeof b, kCommitSlotsOffset + (s.n_commits % 2) * kCommitSlotSize, path);
  base::Fsync(fd, path);
}

std::vector<uint64_t> FindStrandedCommits(int fd, const std::string& path, const Header& h,
                                          uint64_t from, uint64_t file_length) {
  std::vector<uint64_t> found;
  const uint64_t seed = h.header_checksum;
  constexpr size_t kBlock = 1 << 20;
  std::vector<uint8_t> block;
  for (uint64_t base = base::AlignUp(from, 8); base < file_length; base += kBlock) {
    size_t n = static_cast<size_t>(
        std::min<uint64_t>(kBlock + kRecordHeaderSize + kCommitPayloadSize, file_length - base));
    block.resize(n);
    base::PreadFull(fd, block.data(), n, base, path);
    for (size_t k = 0; k + kRecordHeaderSize + kCommitPayloadSize <= n && k < kBlock; k += 8) {
      uint8_t* r = block.data() + k;
      if (LoadLE<uint32_t>(r) != kJournalMagic || LoadLE<uint32_t>(r + 4) != kRecordCommit ||
          LoadLE<uint32_t>(r + 16) != kCommitPayloadSize)
        continue;
      if (RecordChecksum(r, kRecordHeaderSize + kCommitPayloadSize, seed) ==
          LoadLE<uint64_t>(r + 24))
        found.push_back(base + k);
    }
  }
  return found;
}

}  // namespace engram::format
