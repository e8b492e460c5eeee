#pragma once
// One process group of a GlooWorld: its ProcessGroupGloo, the issue turn, the buffer pool and the
// second Gloo context for reduce-scatter and all-gather (Note [gloo world] in
// metron/exec/gloo_world.h). Private: torch types.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <tuple>
#include <vector>

#include "metron/exec/wire_layout.h"
#include "metron/ir/task.h"

namespace metron::exec::detail {

/// Gloo's or torch's message without torch's C++ backtrace.
[[nodiscard]] std::string error_text(const std::exception& error);

class GlooGroup {
 public:
  /// Creates the process group (blocks until every member joins). `store` is the world's store;
  /// the group uses the prefix "group/<index>/".
  GlooGroup(std::int32_t index, std::vector<std::int32_t> members, std::int32_t rank,
            const c10::intrusive_ptr<c10d::Store>& store,
            std::shared_ptr<gloo::transport::Device> device, std::chrono::milliseconds timeout);
  ~GlooGroup();
  GlooGroup(const GlooGroup&) = delete;
  GlooGroup& operator=(const GlooGroup&) = delete;

  /// GlooWorld::collective() for this group; with `data`, GlooWorld::collective_floats().
  void run(std::int64_t ordinal, const ir::Collective& collective, std::span<float> data = {});

  /// For the tests: the input of the buffer set the next run() of `collective` takes (a
  /// single-threaded caller gets the same set back), and the output it leaves there.
  void write_input(const ir::Collective& collective, const std::vector<std::byte>& bytes);
  [[nodiscard]] std::vector<std::byte> read_output(const ir::Collective& collective);

 private:
  /// One collective()'s memory: `calls` slices of input and output, and for reduce-scatter one
  /// gloo algorithm per slice (built at first use, under the turn: see run()).
  struct Buffers {
    WireLayout layout;
    at::Tensor input;
    at::Tensor output;  // the input itself for in-place ops
    std::vector<std::unique_ptr<gloo::Algorithm>> reduce_scatters;
  };
  using Key = std::tuple<ir::CollectiveOp, WireType, std::int64_t, std::int32_t>;

  [[nodiscard]] std::unique_ptr<Buffers> acquire(const ir::Collective& collective);
  void release(const ir::Collective& collective, std::unique_ptr<Buffers> buffers);
  [[nodiscard]] std::vector<c10::intrusive_ptr<c10d::Work>> issue(const ir::Collective& collective,
                                                                  Buffers& buffers);
  void reduce_scatter(Buffers& buffers);
  /// The group's second Gloo context (connected at its first use, under the turn), where the
  /// group runs gloo's own algorithms: reduce-scatter, which ProcessGroupGloo 1.13 lacks, and
  /// all-gather into the pooled buffers.
  [[nodiscard]] const std::shared_ptr<gloo::Context>& direct_context();
  /// Under the turn: the tags of an all-gather's `calls` calls, the same on every member, so
  /// that gathers running at once on the direct context never take each other's messages.
  [[nodiscard]] std::uint32_t take_gather_tags(std::int64_t calls);
  /// Outside the turn (all-gathers of a group may run at once, as the process group's did).
  void all_gather(Buffers& buffers, std::uint32_t first_tag);
  /// The caller's values into the buffers before the call, and the result back after it.
  void copy_in(const ir::Collective& collective, const Buffers& buffers,
               std::span<const float> data) const;
  void copy_out(const ir::Collective& collective, const Buffers& buffers,
                std::span<float> data) const;
  [[nodiscard]] std::int64_t local_index(std::int32_t graph_rank, const char* what) const;
  [[nodiscard]] std::string describe(const ir::Collective& collective, std::int64_t ordinal) const;

  std::int32_t index_;
  std::vector<std::int32_t> members_;
  std::int32_t local_rank_;
  c10::intrusive_ptr<c10d::Store> store_;  // "group/<index>/"
  std::shared_ptr<gloo::transport::Device> device_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> process_group_;
  std::shared_ptr<gloo::Context> direct_context_;  // see direct_context()
  std::uint32_t next_gather_tag_ = 0;              // under the turn

  std::mutex turn_mutex_;
  std::condition_variable turn_changed_;
  std::int64_t next_ordinal_ = 0;  // the lowest ordinal not yet issued

  std::mutex pool_mutex_;
  std::map<Key, std::vector<std::unique_ptr<Buffers>>> pool_;  // free sets
};

}  // namespace metron::exec::detail
