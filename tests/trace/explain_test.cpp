// Replay as a product: where the peak is and what was live there (hand-built traces with known
// answers and the real trace), the frame filter, settings side by side, traces without segments
// (RMM logs) and with several devices, and the fit search checked against brute force.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "memscope/errors.hpp"
#include "memscope/replay_report.hpp"
#include "memscope/report_text.hpp"
#include "memscope/trace.hpp"
#include "trace_corpus.hpp"

namespace memscope {
namespace {

constexpr std::uint64_t kBase = std::uint64_t{1} << 36;

TraceEvent ev(TraceAction action, std::uint64_t addr, std::uint64_t size, std::int64_t time_us,
              StackId stack = 0, TagId tag = 0) {
  TraceEvent e;
  e.action = action;
  e.addr = addr;
  e.size = size;
  e.time_us = time_us;
  e.stack = stack;
  e.tag = tag;
  return e;
}

// A forward and backward pass with known sites. One block was live before the trace began (a
// 20 MiB segment allocated by train.py:5). Every request is a multiple of 2 MiB above 10 MiB,
// so each takes a segment of exactly its size while nothing is cached: reserved and live peak
// at 300 MiB after event 3, with 200 MiB from model.py:10 (twice), 50 MiB from model.py:20, 30 MiB
// without frames and 20 MiB from train.py:5 live.
TorchSnapshot known_trace() {
  TorchSnapshot s;
  const std::string torch_dir = "/venv/lib/python3.11/site-packages/torch/";
  const StackId a =
      s.strings.intern_stack({{torch_dir + "functional.py", 373, "einsum"},
                              {"/home/u/model.py", 10, "forward"},
                              {torch_dir + "nn/modules/module.py", 1790, "_call_impl"},
                              {"/home/u/train.py", 40, "main"}});
  const StackId b = s.strings.intern_stack({{"/home/u/model.py", 20, "backward_hook"}});
  const StackId c = s.strings.intern_stack({{torch_dir + "_tensor.py", 5, "backward"}});
  const StackId d = s.strings.intern_stack({{"/home/u/train.py", 5, "main"}});
  const TagId fwd = s.strings.intern_tag("forward");
  const TagId bwd = s.strings.intern_tag("backward");
  std::vector<TraceEvent>& t = s.device_traces.emplace_back();
  using A = TraceAction;
  t.push_back(ev(A::alloc, kBase + 0x10000000, 100 * MiB, 1000, a, fwd));   // 0
  t.push_back(ev(A::alloc, kBase + 0x20000000, 100 * MiB, 2000, a, fwd));   // 1
  t.push_back(ev(A::alloc, kBase + 0x30000000, 50 * MiB, 3000, b, bwd));    // 2
  t.push_back(ev(A::alloc, kBase + 0x40000000, 30 * MiB, 4000, 0, bwd));    // 3: the peak
  t.push_back(ev(A::free_requested, kBase + 0x10000000, 100 * MiB, 5000));  // 4
  t.push_back(ev(A::free_completed, kBase + 0x10000000, 100 * MiB, 5000));  // 5
  t.push_back(ev(A::free_completed, kBase + 0x20000000, 100 * MiB, 6000));  // 6
  t.push_back(ev(A::alloc, kBase + 0x50000000, 20 * MiB, 7000, c, bwd));    // 7: from the cache
  TorchSegment seg;
  seg.info.address = kBase;
  seg.info.total_size = 20 * MiB;
  seg.info.blocks.push_back({kBase, 20 * MiB, 20 * MiB, BlockState::active_allocated});
  seg.block_stacks.push_back(d);
  s.segments.push_back(seg);
  return s;
}

TEST(Explain, ThePeakAndWhatWasLiveThere) {
  const TorchSnapshot s = known_trace();
  ReplayOptions options;
  options.capacity = GiB;
  const ReplayResult r = replay_trace(s, 0, options);
  EXPECT_EQ(r.num_ooms, 0);
  EXPECT_EQ(r.peak_reserved, static_cast<std::int64_t>(300 * MiB));
  EXPECT_EQ(r.peak_requested, static_cast<std::int64_t>(300 * MiB));
  ASSERT_TRUE(r.peak.happened());
  EXPECT_EQ(r.peak.op, 4U);  // one starting op, then events 0..3
  EXPECT_EQ(r.peak.event, 3U);
  EXPECT_EQ(r.peak.time_us, 4000);
  EXPECT_EQ(r.peak.tag, "backward");
  EXPECT_EQ(r.peak.request, 30 * MiB);
  EXPECT_EQ(r.peak.reserved_bytes, static_cast<std::int64_t>(300 * MiB));
  EXPECT_EQ(r.peak.live_bytes, static_cast<std::int64_t>(300 * MiB));
  EXPECT_EQ(r.peak_live.event, 3U);
  EXPECT_EQ(r.trace_start_us, 1000);
  const LiveBreakdown& live = r.at_peak_reserved;
  EXPECT_EQ(live.bytes, 300 * MiB);
  EXPECT_EQ(live.count, 5U);
  ASSERT_EQ(live.top_sites.size(), 4U);
  EXPECT_EQ(live.top_sites[0].where(), "model.py:10 forward");  // not torch's einsum
  EXPECT_EQ(live.top_sites[0].bytes, 200 * MiB);
  EXPECT_EQ(live.top_sites[0].count, 2U);
  EXPECT_EQ(live.top_sites[1].where(), "model.py:20 backward_hook");
  EXPECT_EQ(live.top_sites[2].where(), "<no frames>");
  EXPECT_EQ(live.top_sites[2].bytes, 30 * MiB);
  EXPECT_EQ(live.top_sites[3].where(), "train.py:5 main");  // the starting block's stack
  EXPECT_EQ(live.top_sites[3].frame.filename, "/home/u/train.py");
  EXPECT_EQ(live.top_sites[3].origin, SiteOrigin::before_recording);
  // Both peaks are the same moment here: one breakdown, labelled both.
  EXPECT_EQ(r.at_peak_live.bytes, live.bytes);
  EXPECT_EQ(r.at_peak_live.top_sites.size(), live.top_sites.size());

  const std::string text = r.explain();
  EXPECT_NE(text.find("at event 3 (t+0.003 s, stage 'backward')"), std::string::npos) << text;
  EXPECT_NE(text.find("model.py:10 forward"), std::string::npos) << text;
  EXPECT_NE(text.find("300.00 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("Live at peak live and peak reserved, event 3 "), std::string::npos) << text;
  // explain() is the text of the replay's Report (replay_report.hpp), the command's report.
  EXPECT_EQ(text, report::render_text(replay_report({.result = &r})));
  const auto summary = replay_report({.result = &r}).summary;
  const auto value = [&](const std::string& key) {
    const auto it = std::find_if(summary.begin(), summary.end(),
                                 [&](const auto& line) { return line.first == key; });
    return it == summary.end() ? std::string("(none)") : it->second;
  };
  EXPECT_EQ(value("allocations and frees"), "7");
  EXPECT_EQ(value("blocks live when recording began"), "1");

  options.top_sites = 2;
  const ReplayResult two = replay_trace(s, 0, options);
  EXPECT_EQ(two.at_peak_reserved.top_sites.size(), 2U);
  EXPECT_EQ(two.at_peak_live.top_sites.size(), 2U);
}

TEST(Explain, AStackOfLibraryCodeOnlyIsBlamedOnItsInnermostLibraryFrame) {
  TorchSnapshot s = known_trace();
  // Free everything but the torch-only allocation, then a new peak made by it alone.
  std::vector<TraceEvent>& t = s.device_traces[0];
  t.push_back(ev(TraceAction::free_completed, kBase + 0x30000000, 50 * MiB, 8000));
  t.push_back(ev(TraceAction::free_completed, kBase + 0x40000000, 30 * MiB, 9000));
  const StackId c = t[7].stack;
  t.push_back(ev(TraceAction::alloc, kBase + 0x60000000, 900 * MiB, 10000, c, 0));
  ReplayOptions options;
  options.capacity = 2 * GiB;
  const ReplayResult r = replay_trace(s, 0, options);
  EXPECT_EQ(r.peak.event, 10U);
  EXPECT_EQ(r.peak.tag, "");
  ASSERT_FALSE(r.at_peak_reserved.top_sites.empty());
  EXPECT_EQ(r.at_peak_reserved.top_sites[0].where(), "_tensor.py:5 backward");
  EXPECT_EQ(r.at_peak_reserved.top_sites[0].bytes, 920 * MiB);  // 900 + the 20 MiB of event 7
}

TEST(Explain, FrameFilter) {
  EXPECT_TRUE(is_plumbing_frame({"/usr/lib/python3.11/site-packages/torch/functional.py", 1, "f"}));
  EXPECT_TRUE(is_plumbing_frame(
      {"D:\\venv\\Lib\\site-packages\\torch\\nn\\modules\\module.py", 1790, "_call_impl"}));
  EXPECT_TRUE(is_plumbing_frame({"/usr/lib/python3.11/runpy.py", 88, "_run_code"}));
  EXPECT_TRUE(is_plumbing_frame({"/usr/lib/libtorch_cuda.so", 0, "foo"}));
  EXPECT_TRUE(is_plumbing_frame({"/usr/lib/libc.so.6", 0, "__libc_start_main"}));
  EXPECT_TRUE(is_plumbing_frame({"/build/memscope", 0, "memscope::CachingAllocator::allocate"}));
  EXPECT_TRUE(is_plumbing_frame({"Python/ceval.c", 1, "_PyEval_EvalFrameDefault"}));
  EXPECT_TRUE(is_plumbing_frame({"aten/src/ATen/core/boxing/impl.h", 1, "call"}));
  EXPECT_FALSE(is_plumbing_frame({"D:\\Dev\\cs336_basics\\model.py", 54, "forward"}));
  EXPECT_FALSE(is_plumbing_frame({"/home/u/train.py", 3, "on_train_start"}));
  EXPECT_FALSE(is_plumbing_frame({"/home/u/solver.py", 3, "format_at"}));
  EXPECT_FALSE(is_plumbing_frame({"/home/u/app", 0, "main"}));
}

// Frames as PyTorch records them with stacks="all" (C++ frames on), from the corpus.
TEST(Explain, FrameKinds) {
  using K = FrameKind;
  EXPECT_EQ(classify_frame({"??", 0, "PyCMethod_New"}), K::internal);
  EXPECT_EQ(classify_frame({"??", 0, "pthread_condattr_setpshared"}), K::internal);
  EXPECT_EQ(classify_frame({"??", 0, "PyDescr_IsData"}), K::internal);
  EXPECT_EQ(classify_frame({"python_variable_methods.cpp", 0,
                            "_object* torch::autograd::TypeError_to_NotImplemented_<&torch::"
                            "autograd::THPVariable_mul>(_object*, _object*, _object*)"}),
            K::internal);
  EXPECT_EQ(classify_frame({"", 0, "c10::cuda::CUDACachingAllocator::Native::malloc()"}),
            K::internal);
  EXPECT_EQ(classify_frame(
                {"/usr/local/src/conda/python-3.12.3/Objects/call.c", 240, "_PyObject_MakeTpCall"}),
            K::internal);
  EXPECT_EQ(classify_frame({"<frozen runpy>", 88, "_run_code"}), K::internal);
  EXPECT_EQ(classify_frame({"thread48.o", 0, "execute_native_thread_routine"}), K::internal);
  EXPECT_EQ(classify_frame({"/tmp/torchinductor_u/gm/cgm4.py", 54, "call"}), K::library);
  EXPECT_EQ(classify_frame({"/home/u/pytorch/torch/_dynamo/eval_frame.py", 1, "_fn"}), K::library);
  EXPECT_EQ(classify_frame({"C:\\Users\\Z\\AppData\\Roaming\\uv\\python\\cpython-3.10.19-windows-"
                            "x86_64-none\\lib\\copy.py",
                            153, "deepcopy"}),
            K::library);
  EXPECT_EQ(classify_frame({"/home/u/cs336_basics/model.py", 101, "forward"}), K::user);
  // A Python function may have a C-like name; compiled code of a native program is its own.
  EXPECT_EQ(classify_frame({"/home/u/train.py", 3, "PyTorch_step"}), K::user);
  EXPECT_EQ(classify_frame({"/home/u/src/train.cpp", 42, "train_step()"}, false), K::user);
  EXPECT_EQ(classify_frame({"/home/u/src/train.cpp", 42, "train_step()"}, true), K::internal);
  EXPECT_EQ(classify_frame({"./nptl/pthread_create.c", 442, "start_thread"}, false), K::internal);
  // Issue 44: memscope_demo's recorded stacks start with the allocator's cold slow path, which
  // dladdr() cannot name ("+0x3fcf9"); blamed, every site of the demo was that one offset.
  EXPECT_EQ(classify_frame({"build/examples/memscope_demo", 0, "+0x3fcf9"}, false), K::internal);
  EXPECT_EQ(classify_frame({"build/examples/memscope_demo", 0, "demo::step(bool)"}, false),
            K::user);
}

// The shape of the corpus's stacks: C++ frames, then the interpreter, then the user's Python
// interleaved with more interpreter frames; and the autograd engine's, with no Python at all.
TEST(Explain, BlamedFrameSkipsThePlumbingOfRecordedCppStacks) {
  TraceStrings strings;
  const StackId forward = strings.intern_stack(
      {{"??", 0, "torch::unwind::unwind()"},
       {"CUDACachingAllocator.cpp", 0, "c10::cuda::CUDACachingAllocator::Native::malloc()"},
       {"python_torch_functions_2.cpp", 0, "torch::autograd::THPVariable_exp(_object*)"},
       {"??", 0, "PyCMethod_New"},
       {"??", 0, "_PyObject_MakeTpCall"},
       {"/venv/lib/python3.12/site-packages/torch/functional.py", 407, "einsum"},
       {"/home/u/cs336_basics/nn_utils.py", 13, "log_softmax"},
       {"??", 0, "_start"},
       {"/home/u/cs336_basics/nn_utils.py", 17, "cross_entropy"}});
  const StackId engine = strings.intern_stack(
      {{"??", 0, "torch::unwind::unwind()"},
       {"??", 0, "at::_ops::empty_strided::call(c10::ArrayRef<long>)"},
       {"??", 0, "at::_ops::mul_Tensor::call(at::Tensor const&, at::Tensor const&)"},
       {"??", 0,
        "torch::autograd::generated::MulBackward0::apply(std::vector<at::Tensor, "
        "std::allocator<at::Tensor> >&&)"},
       {"??", 0, "torch::autograd::Engine::thread_main()"},
       {"thread48.o", 0, "execute_native_thread_routine"},
       {"??", 0, "__clone"}});
  const StackId library = strings.intern_stack(
      {{"??", 0, "PyCMethod_New"},
       {"/venv/lib/python3.12/site-packages/torch/optim/adamw.py", 5, "_multi_tensor_adamw"},
       {"/venv/lib/python3.12/site-packages/torch/optim/optimizer.py", 9, "wrapper"}});
  const StackId only_unknown =
      strings.intern_stack({{"??", 0, "torch::unwind::unwind()"}, {"??", 0, "foo"}});
  ASSERT_NE(blamed_frame(strings, forward), nullptr);
  EXPECT_EQ(blamed_frame(strings, forward)->name, "log_softmax");
  ReplaySite site;
  site.frame = *blamed_frame(strings, engine);
  EXPECT_EQ(site.where(), "torch::autograd::generated::MulBackward0::apply");
  EXPECT_EQ(blamed_frame(strings, library)->name, "_multi_tensor_adamw");
  EXPECT_EQ(blamed_frame(strings, only_unknown)->name, "foo");
  EXPECT_EQ(blamed_frame(strings, 0), nullptr);
  EXPECT_EQ(blamed_frame(strings, 999), nullptr);
}

TEST(Explain, SiteNamesAreShortAndCapped) {
  ReplaySite site;
  site.frame = {"RegisterCUDA_0.cpp", 0,
                "at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA__empty_strided("
                "c10::ArrayRef<c10::SymInt>, c10::ArrayRef<c10::SymInt>) const [clone .isra.0]"};
  EXPECT_EQ(site.where(), "RegisterCUDA_0.cpp at::wrapper_CUDA__empty_strided");
  // A 200-character template name: its start and end kept around "..." in the middle.
  site.frame = {"python_variable_methods.cpp", 0,
                "_object* torch::autograd::TypeError_to_NotImplemented_<" + std::string(150, 'x') +
                    "_tail>(_object*, _object*)"};
  const std::string where = site.where();
  EXPECT_EQ(where.size(), kSiteWidth) << where;
  EXPECT_TRUE(where.starts_with("python_variable_methods.cpp _object* torch::")) << where;
  EXPECT_TRUE(where.ends_with("x_tail>")) << where;
  EXPECT_NE(where.find("..."), std::string::npos) << where;
  // Cut on code points: never inside a UTF-8 sequence.
  std::string utf8;
  for (int i = 0; i < 60; ++i) utf8 += "\xC3\xA9";  // é
  site.frame = {"/home/u/" + std::string(40, 'a') + ".py", 1, "f_" + utf8};
  const std::string cut = site.where();
  std::size_t points = 0;
  for (const char c : cut) points += (static_cast<unsigned char>(c) & 0xC0U) != 0x80U ? 1 : 0;
  EXPECT_EQ(points, kSiteWidth);
  EXPECT_TRUE(cut.ends_with("\xC3\xA9")) << cut;
  // Blocks from before recording say so, by the stack of their free when there is one.
  site.frame = {};
  site.origin = SiteOrigin::before_recording;
  EXPECT_EQ(site.where(), "<allocated before recording>");
  site.origin = SiteOrigin::freed_in_trace;
  EXPECT_EQ(site.where(), "<allocated before recording>");
  site.frame = {"/home/u/model.py", 41, "forward"};
  EXPECT_EQ(site.where(), "freed at model.py:41 forward (allocated before recording)");
  site.frame = {"??", 0, "torch::autograd::generated::MulBackward0::apply()"};
  site.origin = SiteOrigin::traced;
  EXPECT_EQ(site.where(), "torch::autograd::generated::MulBackward0::apply");
}

// Issue 27: a trace whose live bytes peak after its reserved bytes did showed the breakdown of
// the reserved peak (4 MiB) as "live at the peak" (18 MiB).
TEST(Explain, LiveIsBrokenDownAtPeakLiveAndAtPeakReserved) {
  TorchSnapshot s;
  const StackId small = s.strings.intern_stack({{"/home/u/model.py", 1, "small"}});
  const StackId large = s.strings.intern_stack({{"/home/u/model.py", 2, "large"}});
  auto& t = s.device_traces.emplace_back();
  // 4 MiB takes a 20 MiB segment; 14 MiB fits in its rest, so reserved peaks at event 0 and
  // live at event 1.
  t.push_back(ev(TraceAction::alloc, kBase, 4 * MiB, 10, small));
  t.push_back(ev(TraceAction::alloc, kBase + 4 * MiB, 14 * MiB, 20, large));
  const ReplayResult r = replay_trace(s);
  EXPECT_EQ(r.peak_reserved, static_cast<std::int64_t>(20 * MiB));
  EXPECT_EQ(r.peak.event, 0U);
  EXPECT_EQ(r.peak_live.event, 1U);
  EXPECT_EQ(r.at_peak_reserved.bytes, 4 * MiB);
  EXPECT_EQ(r.at_peak_live.bytes, 18 * MiB);
  ASSERT_EQ(r.at_peak_live.top_sites.size(), 2U);
  EXPECT_EQ(r.at_peak_live.top_sites[0].where(), "model.py:2 large");
  ASSERT_EQ(r.at_peak_reserved.top_sites.size(), 1U);
  EXPECT_EQ(r.at_peak_reserved.top_sites[0].where(), "model.py:1 small");
  const std::string text = r.explain();
  EXPECT_NE(text.find("Live at peak live, event 1 (t+0.000 s), by site:"), std::string::npos)
      << text;
  EXPECT_NE(text.find("18.00 MiB live in 2 allocations"), std::string::npos) << text;
  EXPECT_NE(text.find("Live at peak reserved, event 0 (t+0.000 s), by site:"), std::string::npos)
      << text;
  EXPECT_NE(text.find("4.00 MiB live in 1 allocations"), std::string::npos) << text;
}

// RMM logs have no segments: the starting live set comes from frees alone.
TEST(Explain, ATraceWithoutSegments) {
  TorchSnapshot s;
  auto& t = s.device_traces.emplace_back();
  t.push_back(ev(TraceAction::alloc, 0x2000, 32 * MiB, 10));
  t.push_back(ev(TraceAction::free_completed, 0x1000, 64 * MiB, 20));  // live before the log
  t.push_back(ev(TraceAction::alloc, 0x1000, 16 * MiB, 30));           // the address, reused
  t.push_back(ev(TraceAction::free_completed, 0x2000, 32 * MiB, 40));
  const ReplayPlan plan = build_replay_plan(s);
  EXPECT_EQ(plan.starting_frees, 1U);
  EXPECT_EQ(plan.starting_active, 0U);
  EXPECT_EQ(plan.live_before, 64 * MiB);
  EXPECT_EQ(plan.peak_live, 96 * MiB);
  EXPECT_EQ(plan.peak_live_op, 1U);
  EXPECT_EQ(plan.live_at_end, 16 * MiB);
  EXPECT_EQ(plan.allocations, 3U);
  const ReplayResult r = replay_trace(s);
  EXPECT_EQ(r.peak_requested, static_cast<std::int64_t>(96 * MiB));
  EXPECT_EQ(r.peak_live.event, 0U);
  EXPECT_EQ(r.peak.event, 0U);
  EXPECT_EQ(r.at_peak_reserved.count, 2U);
  // The block live before the log was freed with no stack either: said to be from before.
  const std::vector<ReplaySite>& sites = r.at_peak_reserved.top_sites;
  ASSERT_EQ(sites.size(), 2U);
  EXPECT_EQ(sites[0].where(), "<allocated before recording>");
  EXPECT_EQ(sites[0].bytes, 64 * MiB);
  EXPECT_EQ(sites[1].where(), "<no frames>");
}

// The same through RMM's own log format (read_rmm_log), with a recorded failed allocation.
TEST(Explain, AnRmmLog) {
  const TorchSnapshot s = read_rmm_log(
      "Thread,Time,Action,Pointer,Size,Stream\n"
      "1,10:00:00.000010,allocate,0x2000,33554432,0x0\n"
      "1,10:00:00.000020,free,0x1000,67108864,0x0\n"
      "1,10:00:00.000030,allocate,0x1000,16777216,0x0\n"
      "1,10:00:00.000040,allocate failure,0x0,1073741824,0x0\n"
      "1,10:00:00.000050,free,0x2000,33554432,0x0\n",
      "rmm.csv");
  EXPECT_TRUE(s.segments.empty());
  const ReplayResult r = replay_trace(s);
  EXPECT_EQ(r.peak_requested, static_cast<std::int64_t>(96 * MiB));
  EXPECT_EQ(r.peak.event, 0U);
  EXPECT_EQ(r.peak.time_us - r.trace_start_us, 0);
  EXPECT_EQ(r.num_ooms, 0);  // the recorded failure is not an allocation to replay
  EXPECT_EQ(r.final_stats.requested_bytes[0].current, static_cast<std::int64_t>(16 * MiB));
}

TEST(Explain, EachDeviceOnItsOwn) {
  TorchSnapshot s = known_trace();
  s.device_traces.emplace_back();  // device 1 recorded nothing
  auto& t2 = s.device_traces.emplace_back();
  t2.push_back(ev(TraceAction::alloc, kBase, 4 * MiB, 1));
  TorchSegment seg;
  seg.device = 2;
  seg.info.address = kBase + GiB;
  seg.info.total_size = 20 * MiB;
  seg.info.blocks.push_back({kBase + GiB, 12 * MiB, 12 * MiB, BlockState::active_allocated});
  s.segments.push_back(seg);
  EXPECT_EQ(trace_devices(s), (std::vector<std::int64_t>{0, 2}));
  const ReplayResult r2 = replay_trace(s, 2);
  EXPECT_EQ(r2.device, 2);
  EXPECT_EQ(r2.peak_requested,
            static_cast<std::int64_t>(16 * MiB));  // its own block, not device 0's
  EXPECT_EQ(replay_trace(s, 0).peak_requested, static_cast<std::int64_t>(300 * MiB));
  EXPECT_THROW((void)replay_trace(s, 3), TraceFormatError);
}

TEST(Explain, OutOfMemoryIsLocated) {
  const TorchSnapshot s = known_trace();
  ReplayOptions options;
  options.capacity = 250 * MiB;
  const ReplayResult r = replay_trace(s, 0, options);
  EXPECT_GE(r.num_ooms, 1);
  ASSERT_TRUE(r.first_oom.happened());
  EXPECT_EQ(r.first_oom.event, 2U);  // 20 + 100 + 100 reserved, 50 more do not fit
  EXPECT_EQ(r.first_oom.time_us, 3000);
  EXPECT_EQ(r.first_oom.tag, "backward");
  EXPECT_EQ(r.first_oom.request, 50 * MiB);
  const std::string text = r.explain();
  const std::string key = "first out of memory";
  const std::size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(text.compare(text.find_first_not_of(' ', at + key.size()), 9, "event 2 ("), 0) << text;
  options.stop_at_first_oom = true;
  const ReplayResult stopped = replay_trace(s, 0, options);
  EXPECT_TRUE(stopped.stopped_at_oom);
  EXPECT_EQ(stopped.num_ooms, 1);
}

TEST(Explain, SettingsSideBySide) {
  const TorchSnapshot s = known_trace();
  CompareOptions options;
  options.capacity = GiB;
  options.fit = true;
  const Comparison c = compare_settings(
      s, {"", "max_split_size_mb:20", "garbage_collection_threshold:0.8"}, options);
  ASSERT_EQ(c.rows.size(), 3U);
  EXPECT_EQ(c.rows[1].replay.config, "max_split_size_mb:20");
  for (const ComparisonRow& row : c.rows) {
    EXPECT_EQ(row.replay.peak_requested, static_cast<std::int64_t>(300 * MiB));
    ASSERT_TRUE(row.fit.has_value());
    EXPECT_TRUE(row.fit->fits);
    EXPECT_FALSE(row.replay.at_peak_reserved.top_sites.empty());
  }
  for (std::size_t i = 0; i < c.rows.size(); ++i) {  // rows run in parallel: same results
    ReplayOptions o;
    o.config = AllocatorConfig::parse(c.rows[i].replay.config);
    o.capacity = GiB;
    const ReplayResult alone = replay_trace(s, 0, o);
    EXPECT_EQ(c.rows[i].replay.peak_reserved, alone.peak_reserved);
    EXPECT_EQ(c.rows[i].replay.peak.op, alone.peak.op);
    EXPECT_EQ(c.rows[i].replay.num_device_alloc, alone.num_device_alloc);
  }
  const std::string table = c.table();
  EXPECT_NE(table.find("default"), std::string::npos) << table;
  EXPECT_NE(table.find("max_split_size_mb:20"), std::string::npos) << table;
  EXPECT_NE(table.find("smallest device"), std::string::npos) << table;
  EXPECT_THROW((void)compare_settings(s, {"no_such_key:1"}, {}), ConfigError);
}

// ---- The fit search against brute force --------------------------------------------------

// A random trace of whole-MiB requests (1 to 40 MiB), fixed seed; at most `live` allocations
// live at once.
ReplayPlan random_plan(std::mt19937_64& rng, std::size_t events, std::size_t live_max) {
  TorchSnapshot s;
  auto& t = s.device_traces.emplace_back();
  std::vector<std::uint64_t> live;
  std::uint64_t next = kBase;
  for (std::size_t i = 0; i < events; ++i) {
    const bool alloc = live.empty() || (live.size() < live_max && rng() % 100 < 60);
    if (alloc) {
      t.push_back(ev(TraceAction::alloc, next, (1 + rng() % 40) * MiB, 0));
      live.push_back(next);
      next += 64 * MiB;
    } else {
      const std::size_t k = rng() % live.size();
      t.push_back(ev(TraceAction::free_completed, live[k], 0, 0));
      live[k] = live.back();
      live.pop_back();
    }
  }
  return build_replay_plan(s);
}

bool fits_on(const ReplayPlan& plan, const AllocatorConfig& config, std::size_t capacity) {
  ReplayOptions o;
  o.config = config;
  o.capacity = capacity;
  return replay(plan, o).num_ooms == 0;
}

TEST(Fit, BisectionKeepsItsGuaranteeAndMatchesBruteForceWhereFittingIsMonotonic) {
  std::mt19937_64 rng(20261203);
  const std::size_t precision = 8 * MiB;  // coarse, so brute force over the grid is cheap
  std::size_t monotonic = 0, equal = 0;
  const std::vector<std::string> settings = {"", "max_split_size_mb:20",
                                             "garbage_collection_threshold:0.5"};
  for (std::size_t trial = 0; trial < 24; ++trial) {
    SCOPED_TRACE(trial);
    const ReplayPlan plan = random_plan(rng, 40 + rng() % 80, 3 + rng() % 8);
    const AllocatorConfig config = AllocatorConfig::parse(settings[trial % settings.size()]);
    const FitResult fit = fit_capacity(plan, {config, precision, 0});
    ASSERT_TRUE(fit.fits);
    EXPECT_EQ(fit.capacity % precision, 0U);
    EXPECT_GE(fit.capacity, plan.peak_live);
    // The guarantee: it fits there, and not one step below.
    EXPECT_TRUE(fits_on(plan, config, fit.capacity));
    if (fit.capacity - precision >= plan.peak_live) {
      EXPECT_FALSE(fits_on(plan, config, fit.capacity - precision));
    }
    for (const auto& [capacity, ok] : fit.probes) EXPECT_EQ(fits_on(plan, config, capacity), ok);
    // Brute force over the grid up to the largest capacity the search tried.
    std::vector<bool> grid;
    for (std::size_t c = precision; c <= fit.max_capacity; c += precision) {
      grid.push_back(fits_on(plan, config, c));
    }
    const auto first = std::find(grid.begin(), grid.end(), true);
    ASSERT_NE(first, grid.end());
    const std::size_t brute = static_cast<std::size_t>(first - grid.begin() + 1) * precision;
    EXPECT_LE(brute, fit.capacity);
    if (std::all_of(first, grid.end(), [](bool b) { return b; })) {
      ++monotonic;
      EXPECT_EQ(brute, fit.capacity);
      equal += brute == fit.capacity ? 1 : 0;
    }
  }
  EXPECT_GE(monotonic, 12U);  // most random traces are monotonic; those must agree exactly
  RecordProperty("monotonic", static_cast<int>(monotonic));
  RecordProperty("equal", static_cast<int>(equal));
}

TEST(Fit, ErrorsAndLimits) {
  const ReplayPlan plan = build_replay_plan(known_trace());
  EXPECT_THROW((void)fit_capacity(plan, {AllocatorConfig{}, 0, 0}), UsageError);
  // A memory limit caps every device: nothing fits, and the report says so.
  const FitResult capped = fit_capacity(plan, {AllocatorConfig::parse("memory_limit:100MiB")});
  EXPECT_FALSE(capped.fits);
  EXPECT_NE(capped.explain().find("memory_limit"), std::string::npos) << capped.explain();
  const FitResult fit = fit_capacity(plan);
  ASSERT_TRUE(fit.fits);
  EXPECT_EQ(fit.capacity, 300 * MiB);  // the segments: 20 + 100 + 100 + 50 + 30
  EXPECT_NE(fit.explain().find("fits on 300.00 MiB"), std::string::npos) << fit.explain();
}

// distinct_sizes is counted by a radix sort; a set agrees, on sizes spread over all 64 bits.
TEST(Replay, DistinctSizesAreCountedExactly) {
  std::mt19937_64 rng(11);
  for (const std::uint64_t mask :
       {std::uint64_t{0xff}, std::uint64_t{0xffffffff}, ~std::uint64_t{0} >> 2}) {
    TorchSnapshot s;
    auto& t = s.device_traces.emplace_back();
    std::set<std::uint64_t> sizes;
    for (std::uint64_t i = 0; i < 20000; ++i) {
      const std::uint64_t size = (rng() & mask) >> 8;  // small enough that live bytes fit
      t.push_back(ev(TraceAction::alloc, i * 4096, size, 0));
      t.push_back(ev(TraceAction::free_completed, i * 4096, size, 0));
      sizes.insert(size);
    }
    EXPECT_EQ(build_replay_plan(s).distinct_sizes, sizes.size());
  }
}

// Plans built by hand (no slots) replay exactly as the linked plans they stand for.
TEST(Replay, HandBuiltPlansReplayAsLinkedOnes) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 10; ++trial) {
    const ReplayPlan linked = random_plan(rng, 200, 12);
    ReplayPlan bare;
    for (const ReplayOp& op : linked.ops)
      bare.ops.push_back({op.is_free, op.addr, op.is_free ? 0 : op.size});
    bare.ops.push_back({true, 0xdead0000, 0});  // a free of nothing is skipped
    ReplayOptions o;
    o.capacity = GiB;
    o.record_series = true;
    const ReplayResult a = replay(linked, o);
    const ReplayResult b = replay(bare, o);
    EXPECT_EQ(a.peak_reserved, b.peak_reserved);
    EXPECT_EQ(a.peak_requested, b.peak_requested);
    EXPECT_EQ(a.peak.op, b.peak.op);
    EXPECT_EQ(a.peak_live.op, b.peak_live.op);
    EXPECT_EQ(a.at_peak_reserved.bytes, b.at_peak_reserved.bytes);
    EXPECT_EQ(a.at_peak_live.bytes, b.at_peak_live.bytes);
    // The located peak is where the series first reaches it.
    ASSERT_TRUE(a.peak.happened());
    EXPECT_EQ(a.series[a.peak.op].reserved_bytes, a.peak_reserved);
    if (a.peak.op > 0) {
      EXPECT_LT(a.series[a.peak.op - 1].reserved_bytes, a.peak_reserved);
    }
    EXPECT_EQ(a.series[a.peak.op].requested_bytes,
              static_cast<std::int64_t>(a.at_peak_reserved.bytes));
    EXPECT_EQ(a.series[a.peak_live.op].requested_bytes, a.peak_requested);
  }
}

// ---- The real trace ------------------------------------------------------------------------

TEST(RealTraceExplained, KnownPeaksAndTheirPlace) {
  MEMSCOPE_TRACE_OR_SKIP(real, corpus::kSmallTrainStep);
  const TorchSnapshot s = read_trace_file(real);
  const ReplayPlan plan = build_replay_plan(s);
  ReplayOptions options;
  options.record_series = true;
  ReplayResult r = replay(plan, options);
  explain_with_trace(s, plan, r);
  EXPECT_EQ(r.peak_requested, 13'923'997'700);
  EXPECT_EQ(r.peak_reserved, 14'088'667'136);  // the corpus README: 1.0118
  EXPECT_EQ(std::round(r.reserved_over_peak_live * 10000), 10118);
  EXPECT_EQ(r.peak_live.op, plan.peak_live_op);
  ASSERT_TRUE(r.peak.happened());
  EXPECT_EQ(r.series[r.peak.op].reserved_bytes, r.peak_reserved);
  EXPECT_LT(r.series[r.peak.op - 1].reserved_bytes, r.peak_reserved);
  EXPECT_EQ(r.series[r.peak.op].requested_bytes,
            static_cast<std::int64_t>(r.at_peak_reserved.bytes));
  EXPECT_EQ(r.series[r.peak_live.op].requested_bytes,
            static_cast<std::int64_t>(r.at_peak_live.bytes));
  EXPECT_EQ(r.at_peak_live.bytes, static_cast<std::size_t>(r.peak_requested));
  EXPECT_EQ(r.peak.event, plan.ops[r.peak.op].event);
  EXPECT_NE(r.peak.time_us, 0);
  std::size_t site_bytes = 0;
  for (const ReplaySite& site : r.at_peak_reserved.top_sites) site_bytes += site.bytes;
  EXPECT_LE(site_bytes, r.at_peak_reserved.bytes);
  EXPECT_LE(r.at_peak_reserved.top_sites.size(), 10U);
  RecordProperty("explain", r.explain());
  std::printf("%s", r.explain().c_str());

  const FitResult fit = fit_capacity(plan);
  ASSERT_TRUE(fit.fits);
  EXPECT_TRUE(fits_on(plan, AllocatorConfig{}, fit.capacity));
  EXPECT_FALSE(fits_on(plan, AllocatorConfig{}, fit.capacity - fit.precision));
  EXPECT_GE(fit.capacity, plan.peak_live);
  std::printf("%s\n", fit.explain().c_str());
}

// live_by_stack: one entry per stack and origin, totals over all, largest first; the replay's
// breakdowns and `memscope diff` both group through it.
TEST(LiveByStack, GroupsByStackAndOriginLargestFirst) {
  ReplayPlan plan;
  plan.starting_frees = 1;
  const auto alloc = [](std::size_t size, StackId stack, std::uint32_t event) {
    ReplayOp op;
    op.size = size;
    op.stack = stack;
    op.event = event;
    return op;
  };
  plan.ops = {alloc(100, 7, kBeforeTrace),  // freed in the trace: its free's stack
              alloc(10, 7, 0), alloc(20, 7, 1), alloc(500, 3, 2), alloc(1, 9, kBeforeTrace)};
  const LiveBreakdown live = live_by_stack(plan, {0, 1, 2, 3});
  EXPECT_EQ(live.bytes, 630U);
  EXPECT_EQ(live.count, 4U);
  ASSERT_EQ(live.stacks.size(), 3U);
  EXPECT_EQ(live.stacks[0].stack, 3U);
  EXPECT_EQ(live.stacks[1].stack, 7U);
  EXPECT_EQ(live.stacks[1].origin, SiteOrigin::freed_in_trace);
  EXPECT_EQ(live.stacks[1].bytes, 100U);
  EXPECT_EQ(live.stacks[2].origin, SiteOrigin::traced);
  EXPECT_EQ(live.stacks[2].bytes, 30U);
  EXPECT_EQ(live.stacks[2].count, 2U);
  EXPECT_TRUE(live.top_sites.empty());
}

}  // namespace
}  // namespace memscope
