// Engram rows for one forward step, gathered from the table on a side thread in layer order so
// that layer k's rows are ready when the forward pass reaches it (run and serve's steps,
// generation.h). Internal to libengram_model.so; torch-free.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "engram/format/view.h"
#include "engram/model/model_config.h"

namespace engram::model {

// One step's gather. Start it, read each layer's rows (blocking until they are ready), then
// Finish it to collect the hit counts. The view and config must outlive it.
class RowGatherer {
 public:
  RowGatherer(const format::TableView& view, const ModelConfig& mc, std::vector<size_t> table_layer)
      : view_(view), mc_(mc), table_layer_(std::move(table_layer)) {}
  ~RowGatherer();

  // seqs[b] = that sequence's canonical ids so far including this step's T new ones (for padded
  // slots, valid[b * T + t] == 0). Computes every layer's bucket ids now (step entry), then
  // gathers rows in the background.
  void Start(const std::vector<std::vector<uint32_t>>& seqs, int T,
             const std::vector<uint8_t>& valid);
  // Engram layer k's rows, [B, T, memory_dim] floats, once gathered; rethrows a gather error.
  const float* Rows(size_t k);
  // Waits for the gather and adds its lookups and hits (positions with a full n-gram) per
  // sequence. Rethrows a gather error.
  void Finish(std::vector<uint64_t>* seq_lookups, std::vector<uint64_t>* seq_hits);

 private:
  void Run();

  const format::TableView& view_;
  const ModelConfig& mc_;
  std::vector<size_t> table_layer_;
  size_t B_ = 0;
  int T_ = 0;
  std::vector<std::vector<uint64_t>> buckets_;
  std::vector<uint8_t> full_, valid_;
  std::vector<uint32_t> tags_;
  std::vector<std::vector<float>> bufs_;
  std::vector<uint8_t> ready_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread worker_;
  std::exception_ptr error_;
  std::vector<uint64_t> seq_l_, seq_h_;
};

}  // namespace engram::model
