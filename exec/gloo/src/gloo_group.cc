#include "gloo_group.h"

#include <gloo/allgather.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>

#include "metron/base/error.h"

namespace metron::exec::detail {

std::string error_text(const std::exception& error) {
  // torch's what() appends a C++ backtrace, which is noise in a user's message.
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

namespace {

at::ScalarType scalar_type(WireType type) {
  switch (type) {
    case WireType::kFloat32:
      return at::kFloat;
    case WireType::kFloat16:
      return at::kHalf;
    case WireType::kInt64:
      return at::kLong;
    case WireType::kInt32:
      return at::kInt;
    case WireType::kUint8:
      return at::kByte;
  }
  return at::kByte;
}

bool is_in_place(ir::CollectiveOp op) {
  return op != ir::CollectiveOp::kAllGather && op != ir::CollectiveOp::kAllToAll;
}

template <class T>
std::unique_ptr<gloo::Algorithm> make_reduce_scatter(const std::shared_ptr<gloo::Context>& context,
                                                     void* data, int elements, int chunk) {
  std::vector<int> received(static_cast<std::size_t>(context->size), chunk);
  return std::make_unique<gloo::ReduceScatterHalvingDoubling<T>>(
      context, std::vector<T*>{static_cast<T*>(data)}, elements, std::move(received));
}

std::unique_ptr<gloo::Algorithm> make_reduce_scatter(WireType type,
                                                     const std::shared_ptr<gloo::Context>& context,
                                                     void* data, int elements, int chunk) {
  switch (type) {
    case WireType::kFloat32:
      return make_reduce_scatter<float>(context, data, elements, chunk);
    case WireType::kFloat16:
      return make_reduce_scatter<gloo::float16>(context, data, elements, chunk);
    case WireType::kInt64:
      return make_reduce_scatter<std::int64_t>(context, data, elements, chunk);
    case WireType::kInt32:
      return make_reduce_scatter<std::int32_t>(context, data, elements, chunk);
    case WireType::kUint8:
      return make_reduce_scatter<std::uint8_t>(context, data, elements, chunk);
  }
  return nullptr;
}

std::string join(const std::vector<std::int32_t>& ranks) {
  std::string text;
  for (std::int32_t r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
  return text;
}

}  // namespace

GlooGroup::GlooGroup(std::int32_t index, std::vector<std::int32_t> members, std::int32_t rank,
                     const c10::intrusive_ptr<c10d::Store>& store,
                     std::shared_ptr<gloo::transport::Device> device,
                     std::chrono::milliseconds timeout)
    : index_(index),
      members_(std::move(members)),
      local_rank_(0),
      store_(c10::make_intrusive<c10d::PrefixStore>("group/" + std::to_string(index), store)),
      device_(std::move(device)),
      timeout_(timeout) {
  local_rank_ = static_cast<std::int32_t>(local_index(rank, "rank"));
  auto options = c10d::ProcessGroupGloo::Options::create(timeout_);
  options->devices = {device_};
  process_group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
      store_, local_rank_, static_cast<int>(members_.size()), options);
}

GlooGroup::~GlooGroup() = default;

void GlooGroup::run(std::int64_t ordinal, const ir::Collective& collective, std::span<float> data) {
  // Checked before the turn: an input error must not leave later ordinals waiting for it.
  const WireLayout checked = wire_layout(collective, static_cast<std::int32_t>(members_.size()));
  if (!data.empty() && (checked.type != WireType::kFloat32 || checked.calls != 1 ||
                        std::cmp_not_equal(data.size(), checked.call_elements) ||
                        collective.op == ir::CollectiveOp::kAllToAll)) {
    throw InvalidConfig(describe(collective, ordinal) +
                        ": real values travel as one fp32 call "
                        "over the whole buffer (" +
                        std::to_string(checked.call_elements) + " elements); got " +
                        std::to_string(data.size()) + " values");
  }
  if (collective.op == ir::CollectiveOp::kReduce || collective.op == ir::CollectiveOp::kBroadcast) {
    (void)local_index(collective.root.value(), "root rank");
  }
  struct Turn {  // holds the issue turn of `ordinal`; passes it on however the scope ends
    GlooGroup& group;
    Turn(GlooGroup& g, std::int64_t ordinal) : group(g) {
      std::unique_lock lock(group.turn_mutex_);
      METRON_ASSERT(ordinal >= group.next_ordinal_, "gloo group " + std::to_string(group.index_) +
                                                        ": ordinal " + std::to_string(ordinal) +
                                                        " was issued already");
      group.turn_changed_.wait(lock, [&] { return group.next_ordinal_ == ordinal; });
    }
    ~Turn() {
      {
        std::lock_guard lock(group.turn_mutex_);
        ++group.next_ordinal_;
      }
      group.turn_changed_.notify_all();
    }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
  };

  std::unique_ptr<Buffers> buffers;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  std::optional<std::uint32_t> gather_tag;  // an all-gather's first tag, taken under the turn
  try {
    Turn turn(*this, ordinal);
    if (collective.bytes <= 0) return;
    buffers = acquire(collective);
    if (!data.empty()) copy_in(collective, *buffers, data);
    if (collective.op == ir::CollectiveOp::kReduceScatter) {
      // Synchronous, and released under the turn so that every member's pool (and with it the
      // order in which algorithms take Gloo slots) stays the same.
      reduce_scatter(*buffers);
      if (!data.empty()) copy_out(collective, *buffers, data);
      release(collective, std::move(buffers));
      return;
    }
    if (collective.op == ir::CollectiveOp::kAllGather) {
      gather_tag = take_gather_tags(buffers->layout.calls);
    } else {
      works = issue(collective, *buffers);
    }
  } catch (const metron::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw BackendError(describe(collective, ordinal) + ": " + error_text(error));
  }
  try {
    if (gather_tag) all_gather(*buffers, *gather_tag);
    for (const auto& work : works) work->wait();
  } catch (const std::exception& error) {
    throw BackendError(describe(collective, ordinal) + ": " + error_text(error));
  }
  if (!data.empty()) copy_out(collective, *buffers, data);
  release(collective, std::move(buffers));
}

// Real values (Note [gloo world]): all-gather's input is the caller's own chunk of `data`,
// reduce-scatter's result goes back to that chunk; the others use the whole buffer both ways.
void GlooGroup::copy_in(const ir::Collective& collective, const Buffers& buffers,
                        std::span<const float> data) const {
  std::span<const float> from = data;
  if (collective.op == ir::CollectiveOp::kAllGather) {
    from = data.subspan(static_cast<std::size_t>(local_rank_ * buffers.layout.chunk_elements),
                        static_cast<std::size_t>(buffers.layout.chunk_elements));
  }
  std::memcpy(buffers.input.data_ptr(), from.data(), from.size_bytes());
}

void GlooGroup::copy_out(const ir::Collective& collective, const Buffers& buffers,
                         std::span<float> data) const {
  if (collective.op == ir::CollectiveOp::kReduceScatter) {
    // Gloo leaves the result at the start of the buffer.
    const std::span<float> to =
        data.subspan(static_cast<std::size_t>(local_rank_ * buffers.layout.chunk_elements),
                     static_cast<std::size_t>(buffers.layout.chunk_elements));
    std::memcpy(to.data(), buffers.input.data_ptr(), to.size_bytes());
    return;
  }
  std::memcpy(data.data(), buffers.output.data_ptr(), data.size_bytes());
}

std::vector<c10::intrusive_ptr<c10d::Work>> GlooGroup::issue(const ir::Collective& collective,
                                                             Buffers& buffers) {
  const WireLayout& layout = buffers.layout;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (std::int64_t call = 0; call < layout.calls; ++call) {
    at::Tensor input =
        buffers.input.narrow(0, call * layout.input_elements(), layout.input_elements());
    at::Tensor output =
        buffers.output.narrow(0, call * layout.output_elements(), layout.output_elements());
    std::vector<at::Tensor> tensors{input};
    switch (collective.op) {
      case ir::CollectiveOp::kAllReduce:
        works.push_back(process_group_->allreduce(tensors));
        break;
      case ir::CollectiveOp::kReduce: {
        c10d::ReduceOptions options;
        options.rootRank = local_index(collective.root.value(), "root rank");
        works.push_back(process_group_->reduce(tensors, options));
        break;
      }
      case ir::CollectiveOp::kBroadcast: {
        c10d::BroadcastOptions options;
        options.rootRank = local_index(collective.root.value(), "root rank");
        works.push_back(process_group_->broadcast(tensors, options));
        break;
      }
      case ir::CollectiveOp::kAllToAll: {
        std::vector<std::int64_t> output_splits;  // empty: equal splits
        std::vector<std::int64_t> input_splits;
        works.push_back(process_group_->alltoall_base(output, input, output_splits, input_splits));
        break;
      }
      case ir::CollectiveOp::kReduceScatter:
      case ir::CollectiveOp::kAllGather:
        METRON_ASSERT(false, "reduce-scatter and all-gather do not go through the process group");
    }
  }
  return works;
}

const std::shared_ptr<gloo::Context>& GlooGroup::direct_context() {
  if (!direct_context_) {
    auto context =
        std::make_shared<gloo::rendezvous::Context>(local_rank_, static_cast<int>(members_.size()));
    context->setTimeout(timeout_);
    c10d::ProcessGroupGloo::GlooStore store(c10::make_intrusive<c10d::PrefixStore>("rs", store_));
    context->connectFullMesh(store, device_);
    direct_context_ = std::move(context);
  }
  return direct_context_;
}

std::uint32_t GlooGroup::take_gather_tags(std::int64_t calls) {
  static_cast<void>(direct_context());  // connected by every member at the same turn
  const std::uint32_t first = next_gather_tag_;
  next_gather_tag_ += static_cast<std::uint32_t>(calls);  // wraps: tags only tell apart the
  return first;                                           // gathers that run at once
}

void GlooGroup::all_gather(Buffers& buffers, std::uint32_t first_tag) {
  const WireLayout& layout = buffers.layout;
  const std::int64_t bytes = element_bytes(layout.type);
  auto* input = static_cast<std::uint8_t*>(buffers.input.data_ptr());
  auto* output = static_cast<std::uint8_t*>(buffers.output.data_ptr());
  for (std::int64_t call = 0; call < layout.calls; ++call) {
    // Into the pooled output, as bytes (a gather moves them, whatever their type): torch 1.13's
    // ProcessGroupGloo::allgather runs this same gloo::allgather, but into a new flat tensor that
    // it then copies to the outputs, which cost a fresh allocation and a copy of the whole
    // output per call.
    gloo::AllgatherOptions options(direct_context_);
    options.setInput(input + call * layout.input_elements() * bytes,
                     static_cast<std::size_t>(layout.input_elements() * bytes));
    options.setOutput(output + call * layout.output_elements() * bytes,
                      static_cast<std::size_t>(layout.output_elements() * bytes));
    options.setTag(first_tag + static_cast<std::uint32_t>(call));
    gloo::allgather(options);
  }
}

void GlooGroup::reduce_scatter(Buffers& buffers) {
  if (members_.size() == 1) return;  // the input already is the result
  const WireLayout& layout = buffers.layout;
  if (layout.call_elements > INT_MAX) {
    throw BackendError("gloo reduce-scatter on group " + std::to_string(index_) + ": " +
                       std::to_string(layout.call_elements) +
                       " elements per call exceed gloo's int count; raise count");
  }
  const std::shared_ptr<gloo::Context>& context = direct_context();
  if (buffers.reduce_scatters.empty()) {
    const std::int64_t bytes = layout.call_elements * element_bytes(layout.type);
    auto* base = static_cast<std::byte*>(buffers.input.data_ptr());
    for (std::int64_t call = 0; call < layout.calls; ++call) {
      buffers.reduce_scatters.push_back(make_reduce_scatter(
          layout.type, context, base + call * bytes, static_cast<int>(layout.call_elements),
          static_cast<int>(layout.chunk_elements)));
    }
  }
  for (const auto& algorithm : buffers.reduce_scatters) algorithm->run();
}

std::unique_ptr<GlooGroup::Buffers> GlooGroup::acquire(const ir::Collective& collective) {
  const WireLayout layout = wire_layout(collective, static_cast<std::int32_t>(members_.size()));
  const Key key{collective.op, layout.type, collective.bytes, collective.count};
  {
    std::lock_guard lock(pool_mutex_);
    auto& free = pool_[key];
    if (!free.empty()) {
      std::unique_ptr<Buffers> buffers = std::move(free.back());
      free.pop_back();
      return buffers;
    }
  }
  // Zeros, not empty(): garbage floats may be denormals, which slow down CPU reductions.
  const auto options = at::TensorOptions().dtype(scalar_type(layout.type));
  auto buffers = std::make_unique<Buffers>();
  buffers->layout = layout;
  buffers->input = at::zeros({layout.calls * layout.input_elements()}, options);
  buffers->output = is_in_place(collective.op)
                        ? buffers->input
                        : at::zeros({layout.calls * layout.output_elements()}, options);
  return buffers;
}

void GlooGroup::release(const ir::Collective& collective, std::unique_ptr<Buffers> buffers) {
  const Key key{collective.op, buffers->layout.type, collective.bytes, collective.count};
  std::lock_guard lock(pool_mutex_);
  pool_[key].push_back(std::move(buffers));
}

void GlooGroup::write_input(const ir::Collective& collective, const std::vector<std::byte>& bytes) {
  std::unique_ptr<Buffers> buffers = acquire(collective);
  METRON_ASSERT(bytes.size() == buffers->input.nbytes(),
                "input of " + std::to_string(buffers->input.nbytes()) + " bytes; got " +
                    std::to_string(bytes.size()));
  std::memcpy(buffers->input.data_ptr(), bytes.data(), bytes.size());
  release(collective, std::move(buffers));
}

std::vector<std::byte> GlooGroup::read_output(const ir::Collective& collective) {
  std::unique_ptr<Buffers> buffers = acquire(collective);
  const WireLayout& layout = buffers->layout;
  const auto size = static_cast<std::size_t>(element_bytes(layout.type));
  const auto* data = static_cast<const std::byte*>(buffers->output.data_ptr());
  std::vector<std::byte> bytes;
  if (collective.op == ir::CollectiveOp::kReduceScatter) {
    // Gloo leaves each call's result at the start of its slice.
    for (std::int64_t call = 0; call < layout.calls; ++call) {
      const std::byte* begin = data + static_cast<std::size_t>(call * layout.call_elements) * size;
      bytes.insert(bytes.end(), begin,
                   begin + static_cast<std::size_t>(layout.chunk_elements) * size);
    }
  } else {
    bytes.assign(data, data + buffers->output.nbytes());
  }
  release(collective, std::move(buffers));
  return bytes;
}

std::int64_t GlooGroup::local_index(std::int32_t graph_rank, const char* what) const {
  auto found = std::find(members_.begin(), members_.end(), graph_rank);
  if (found == members_.end()) {
    throw InvalidConfig("gloo group " + std::to_string(index_) + ": " + what + " " +
                        std::to_string(graph_rank) + " is not a member; members are " +
                        join(members_));
  }
  return found - members_.begin();
}

std::string GlooGroup::describe(const ir::Collective& collective, std::int64_t ordinal) const {
  return "gloo " + std::string(ir::to_string(collective.op)) + " on group " +
         std::to_string(index_) + " (ordinal " + std::to_string(ordinal) + ", " +
         std::to_string(collective.bytes) + " bytes)";
}

}  // namespace metron::exec::detail
