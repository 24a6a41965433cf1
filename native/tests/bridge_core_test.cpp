// The bridge core on the real ExecuTorch runtime: loading, metadata, execution, errors.
#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "bridge_core.h"
#include "native_log.h"
#include "sha256.h"

namespace {

using etserve::BridgeError;
using etserve::InputView;
using etserve::InstanceHandle;
using etserve::ProgramHandle;
using etserve::StreamMode;
using etserve::StreamSelection;

const std::string kRoot = ETSERVE_REPO_ROOT;
const std::string kDemo = kRoot + "/models/demo-portable/1/model.pte";
const std::string kDemoXnnpack = kRoot + "/models/demo-xnnpack/1/model.pte";
const std::string kProbe = kRoot + "/src/test/resources/models/caller-stream-probe/1/model.pte";

constexpr int kFloat = 6;
constexpr int kLong = 4;

std::string temp_file(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

BridgeError load_error(const std::string& path) {
  etserve::install_log_hook();
  etserve::LogCapture capture;
  try {
    ProgramHandle::open(path, 1);
  } catch (const BridgeError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a load error for " << path;
  return BridgeError("none", 0, "");
}

BridgeError load_error_with(const std::string& path, const std::vector<std::string>& data_files) {
  try {
    ProgramHandle::open(path, 1, data_files);
  } catch (const BridgeError& e) {
    return e;
  }
  ADD_FAILURE() << "expected a load error for " << path;
  return BridgeError("none", 0, "");
}

TEST(Program, ListsMethodsAndSignature) {
  auto program = ProgramHandle::open(kDemo, 1);
  EXPECT_EQ(program->method_names(), std::vector<std::string>{"forward"});
  const auto sig = program->signature("forward");
  ASSERT_EQ(sig.inputs.size(), 1u);
  EXPECT_EQ(sig.inputs[0].dtype, kFloat);
  EXPECT_EQ(sig.inputs[0].sizes, (std::vector<int64_t>{1, 16}));
  ASSERT_EQ(sig.outputs.size(), 1u);
  EXPECT_EQ(sig.outputs[0].sizes, (std::vector<int64_t>{1, 4}));
  EXPECT_TRUE(sig.backends.empty());
}

TEST(Program, XnnpackVariantNamesItsDelegate) {
  auto program = ProgramHandle::open(kDemoXnnpack, 1);
  const auto sig = program->signature("forward");
  ASSERT_FALSE(sig.backends.empty());
  EXPECT_EQ(sig.backends[0], "XnnpackBackend");
}

TEST(Program, UnknownMethodIsAnError) {
  auto program = ProgramHandle::open(kDemo, 1);
  EXPECT_THROW(program->signature("nope"), BridgeError);
}

TEST(ProgramErrors, MissingFile) { EXPECT_EQ(load_error("/nonexistent/model.pte").name(), "NotFound"); }

TEST(ProgramErrors, EmptyFile) {
  EXPECT_EQ(load_error(temp_file("empty.pte", "")).name(), "InvalidProgram");
}

TEST(ProgramErrors, NotAProgram) {
  const auto e = load_error(temp_file("text.pte", std::string(4096, 'x')));
  EXPECT_NE(e.name(), "none");
}

TEST(ProgramErrors, TruncatedProgram) {
  const std::string bytes = read_file(kDemo);
  ASSERT_GT(bytes.size(), 200u);
  const auto e = load_error(temp_file("truncated.pte", bytes.substr(0, bytes.size() / 2)));
  EXPECT_NE(e.name(), "none");
}

TEST(ProgramErrors, CorruptProgram) {
  std::string bytes = read_file(kDemo);
  // Scribble over the flatbuffer tables after the header: verification must catch it.
  for (size_t i = 64; i < bytes.size() && i < 2048; i += 7) bytes[i] = static_cast<char>(0xFF);
  const auto e = load_error(temp_file("corrupt.pte", bytes));
  EXPECT_NE(e.name(), "none");
}

TEST(ProgramErrors, Directory) {
  EXPECT_EQ(load_error(::testing::TempDir()).name(), "InvalidArgument");
}

std::vector<float> demo_input() {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = 0.1f * static_cast<float>(i) - 0.5f;
  return x;
}

TEST(Instance, ExecutesAndCopiesOutputs) {
  auto program = ProgramHandle::open(kDemo, 1);
  InstanceHandle instance(program, "forward");
  auto x = demo_input();
  InputView in{x.data(), x.size() * sizeof(float), kFloat, {1, 16}};
  const auto outs = instance.execute({in}, StreamSelection{});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].dtype, kFloat);
  EXPECT_EQ(outs[0].sizes, (std::vector<int64_t>{1, 4}));
  ASSERT_EQ(outs[0].bytes.size(), 16u);
  // Same input, second instance over the shared program: same answer, separate memory.
  InstanceHandle other(program, "forward");
  const auto again = other.execute({in}, StreamSelection{});
  EXPECT_EQ(outs[0].bytes, again[0].bytes);
  EXPECT_NE(static_cast<const void*>(outs[0].bytes.data()),
            static_cast<const void*>(again[0].bytes.data()));
}

TEST(Instance, PortableAndXnnpackAgree) {
  auto a = ProgramHandle::open(kDemo, 1);
  auto b = ProgramHandle::open(kDemoXnnpack, 1);
  InstanceHandle ia(a, "forward"), ib(b, "forward");
  auto x = demo_input();
  InputView in{x.data(), x.size() * sizeof(float), kFloat, {1, 16}};
  const auto oa = ia.execute({in}, StreamSelection{});
  const auto ob = ib.execute({in}, StreamSelection{});
  const auto* fa = reinterpret_cast<const float*>(oa[0].bytes.data());
  const auto* fb = reinterpret_cast<const float*>(ob[0].bytes.data());
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(fa[i], fb[i], 1e-4);
}

TEST(Instance, ACallThatWaitsOnNoGpuReportsNoAdaptiveWaitAndCountsNone) {
  struct Discard : etserve::OutputSink {
    size_t seen = 0;
    std::vector<uint8_t> scratch;
    void begin(size_t) override {}
    uint8_t* reserve(size_t, size_t nbytes) override {
      scratch.resize(nbytes);
      return scratch.data();
    }
    void accept(size_t, int, const std::vector<int64_t>&, const uint8_t*, size_t) override { ++seen; }
  } sink;
  auto program = ProgramHandle::open(kDemo, 1);
  InstanceHandle instance(program, "forward");
  auto x = demo_input();
  InputView in{x.data(), x.size() * sizeof(float), kFloat, {1, 16}};
  using Ended = etserve::AdaptiveWaitPolicy::Ended;
  EXPECT_EQ(instance.execute({in}, StreamSelection{}, sink), Ended::kNone);
  EXPECT_EQ(instance.execute({in}, StreamSelection{StreamMode::kSelectOnly, 0xBEEF00, 0}, sink), Ended::kNone);
  EXPECT_EQ(sink.seen, 2u);
  const auto stats = instance.stats();
  EXPECT_EQ(stats.waits.at_start + stats.waits.overslept + stats.waits.in_spin + stats.waits.in_backoff, 0u);
  EXPECT_EQ(stats.last_wait_end_ns, 0);
}

TEST(InstanceErrors, WrongArityDtypeShapeAndSize) {
  auto program = ProgramHandle::open(kDemo, 1);
  InstanceHandle instance(program, "forward");
  auto x = demo_input();
  InputView good{x.data(), x.size() * sizeof(float), kFloat, {1, 16}};
  EXPECT_THROW(instance.execute({}, StreamSelection{}), BridgeError);
  EXPECT_THROW(instance.execute({good, good}, StreamSelection{}), BridgeError);
  InputView dtype = good;
  dtype.dtype = kLong;
  EXPECT_THROW(instance.execute({dtype}, StreamSelection{}), BridgeError);
  InputView rank = good;
  rank.sizes = {16};
  EXPECT_THROW(instance.execute({rank}, StreamSelection{}), BridgeError);
  InputView small = good;
  small.capacity = 8;
  EXPECT_THROW(instance.execute({small}, StreamSelection{}), BridgeError);
  InputView negative = good;
  negative.sizes = {-1, 16};
  EXPECT_THROW(instance.execute({negative}, StreamSelection{}), BridgeError);
  InputView huge = good;
  huge.sizes = {1LL << 40, 1LL << 40};
  EXPECT_THROW(instance.execute({huge}, StreamSelection{}), BridgeError);
  // Still usable after every refusal.
  EXPECT_EQ(instance.execute({good}, StreamSelection{}).size(), 1u);
}

class Probe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // The probe delegate registers itself into ExecuTorch's one registry on load.
    probe_ = dlopen(ETSERVE_PROBE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(probe_, nullptr) << dlerror();
  }
  static void* probe_;

  std::vector<int64_t> observe(const StreamSelection& selection) {
    auto program = ProgramHandle::open(kProbe, 1);
    EXPECT_EQ(program->signature("forward").backends,
              std::vector<std::string>{"CallerStreamProbe"});
    InstanceHandle instance(program, "forward");
    float x[2] = {0, 0};
    InputView in{x, sizeof(x), kFloat, {2}};
    const auto outs = instance.execute({in}, selection);
    const auto* v = reinterpret_cast<const int64_t*>(outs.at(0).bytes.data());
    return {v[0], v[1], v[2]};
  }
};
void* Probe::probe_ = nullptr;

TEST_F(Probe, NoGuardGivesNoSelection) {
  const auto seen = observe(StreamSelection{});
  EXPECT_EQ(seen[0], 0);
}

TEST_F(Probe, GuardedCallShowsTheHandle) {
  const auto seen = observe(StreamSelection{StreamMode::kSelectOnly, 0xBEEF00, 0});
  EXPECT_EQ(seen[0], 1);
  EXPECT_EQ(seen[1], 0xBEEF00);
}

TEST_F(Probe, ExplicitNullHandleIsASelection) {
  const auto seen = observe(StreamSelection{StreamMode::kSelectOnly, 0, 0});
  EXPECT_EQ(seen[0], 1);
  EXPECT_EQ(seen[1], 0);
}

TEST_F(Probe, SelectionEndsWithTheCall) {
  observe(StreamSelection{StreamMode::kSelectOnly, 0x77, 0});
  EXPECT_FALSE(etserve::observe_caller_stream().has_value);
}

TEST_F(Probe, RegisteredOnceInTheOneRegistry) {
  const auto names = etserve::registered_backends();
  EXPECT_EQ(std::count(names.begin(), names.end(), "CallerStreamProbe"), 1);
  EXPECT_EQ(std::count(names.begin(), names.end(), "XnnpackBackend"), 1);
}

}  // namespace

namespace {

// The captured log is bounded and always ends on a whole UTF-8 character (Java needs both).
TEST(LogCapture, BoundedAndWholeCharacters) {
  etserve::LogCapture capture;
  std::string snowmen;
  for (int i = 0; i < 10000; ++i) snowmen += "\xE2\x98\x83";  // U+2603, 3 bytes each
  capture.append('E', snowmen.data(), snowmen.size());
  capture.append('E', snowmen.data(), snowmen.size());
  const std::string& text = capture.text();
  EXPECT_LE(text.size(), 16u * 1024u);
  EXPECT_GT(text.size(), 8u * 1024u);
  ASSERT_EQ(text.substr(0, 2), "E ");
  // Every character after the prefix is a complete 3-byte sequence.
  EXPECT_EQ((text.size() - 2) % 3, 0u);
  EXPECT_EQ(static_cast<unsigned char>(text.back()), 0x83);
}

TEST(LogCapture, NestedCapturesRestoreTheOuterOne) {
  etserve::install_log_hook();
  etserve::LogCapture outer;
  {
    etserve::LogCapture inner;
    inner.append('I', "inner", 5);
    EXPECT_EQ(inner.text(), "I inner");
  }
  outer.append('W', "outer", 5);
  EXPECT_EQ(outer.text(), "W outer");
}

}  // namespace

namespace {

const std::string kExternal = kRoot + "/src/test/resources/models/external-weights-";
const std::string kPortablePte = kExternal + "portable/1/model.pte";
const std::string kPortablePtd = kExternal + "portable/1/_default_external_constant.ptd";
const std::string kXnnpackPte = kExternal + "xnnpack/1/model.pte";
const std::string kXnnpackPtd = kExternal + "xnnpack/1/model.ptd";
const std::string kDynamic = kRoot + "/src/test/resources/models/dynamic-batch/1/model.pte";

std::vector<float> ramp(size_t n) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = std::sin(static_cast<float>(i));
  return x;
}

std::string instance_error(const std::shared_ptr<ProgramHandle>& program) {
  try {
    InstanceHandle instance(program, "forward");
  } catch (const BridgeError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected the method load to fail";
  return {};
}

}  // namespace

TEST(DataFiles, PortableAndXnnpackReadTheirWeightsFromPtdAndAgree) {
  // Same seeded module exported both ways: two independent paths to one answer.
  auto portable = ProgramHandle::open(kPortablePte, 1, {kPortablePtd});
  auto xnnpack = ProgramHandle::open(kXnnpackPte, 1, {kXnnpackPtd});
  InstanceHandle a(portable, "forward");
  InstanceHandle b(xnnpack, "forward");
  auto x = ramp(32);
  InputView in{x.data(), x.size() * sizeof(float), kFloat, {2, 16}};
  const auto pa = a.execute({in}, StreamSelection{});
  const auto pb = b.execute({in}, StreamSelection{});
  ASSERT_EQ(pa[0].sizes, (std::vector<int64_t>{2, 4}));
  ASSERT_EQ(pa[0].bytes.size(), pb[0].bytes.size());
  const auto* fa = reinterpret_cast<const float*>(pa[0].bytes.data());
  const auto* fb = reinterpret_cast<const float*>(pb[0].bytes.data());
  float magnitude = 0;
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_NEAR(fa[i], fb[i], 1e-4f) << i;
    magnitude += std::fabs(fa[i]);
  }
  EXPECT_GT(magnitude, 0.0f);  // weights were really read, not zeros
}

TEST(DataFiles, InstancesKeepTheMappingAliveAfterTheHandleGoes) {
  auto program = ProgramHandle::open(kPortablePte, 0, {kPortablePtd});
  auto instance = std::make_unique<InstanceHandle>(program, "forward");
  EXPECT_EQ(program->data_files(), std::vector<std::string>{kPortablePtd});
  program.reset();
  auto x = ramp(32);
  InputView in{x.data(), x.size() * sizeof(float), kFloat, {2, 16}};
  EXPECT_EQ(instance->execute({in}, StreamSelection{})[0].bytes.size(), 32u);
}

TEST(DataFiles, MissingFileKeyOrMapAreSentences) {
  EXPECT_NE(std::string(load_error_with(kPortablePte, {"/nonexistent/w.ptd"}).what())
                .find("no such data file: /nonexistent/w.ptd"),
            std::string::npos);
  EXPECT_NE(std::string(load_error_with(kPortablePte, {kDemo}).what()).find("cannot read data file"),
            std::string::npos);
  // No data file at all: ExecuTorch's "external_data_map is null" becomes advice.
  EXPECT_NE(instance_error(ProgramHandle::open(kPortablePte, 0)).find("put its .ptd file next to it"),
            std::string::npos);
  // The other program's file: its keys are missing, the message names the file.
  const auto wrong = instance_error(ProgramHandle::open(kXnnpackPte, 0, {kPortablePtd}));
  EXPECT_NE(wrong.find(kPortablePtd), std::string::npos) << wrong;
}

TEST(DataFiles, SeveralFilesAreMerged) {
  auto program = ProgramHandle::open(kPortablePte, 0, {kXnnpackPtd, kPortablePtd});
  InstanceHandle instance(program, "forward");
  auto x = ramp(32);
  InputView in{x.data(), x.size() * sizeof(float), kFloat, {2, 16}};
  EXPECT_EQ(instance.execute({in}, StreamSelection{})[0].sizes, (std::vector<int64_t>{2, 4}));
}

TEST(DynamicShapes, TheLoadedMethodReportsDynamismAndSmallerBatchesRun) {
  auto program = ProgramHandle::open(kDynamic, 1);
  EXPECT_EQ(program->signature("forward").inputs[0].sizes, (std::vector<int64_t>{32, 16}));
  InstanceHandle instance(program, "forward");
  EXPECT_NE(instance.signature().inputs[0].dynamism, 0);
  EXPECT_NE(instance.signature().outputs[0].dynamism, 0);
  auto x = ramp(32 * 16);
  for (int64_t batch : {1, 5, 32}) {
    InputView in{x.data(), x.size() * sizeof(float), kFloat, {batch, 16}};
    EXPECT_EQ(instance.execute({in}, StreamSelection{})[0].sizes, (std::vector<int64_t>{batch, 4}));
  }
  InstanceHandle demo(ProgramHandle::open(kDemo, 0), "forward");
  EXPECT_EQ(demo.signature().inputs[0].dynamism, 0);
}

// A program lowered as CudaPartitioner lowers (tensors at the delegate planned on cuda:0, copies
// around it) plans device memory: a CPU instance refuses it with that reason, before ExecuTorch
// would hand the delegate host memory it believes is on the device.
TEST(DevicePlannedMemory, ACpuInstanceRefusesBuffersPlannedOnADevice) {
  const auto program = ProgramHandle::open(kRoot + "/src/test/resources/models/needs-cuda-backend/1/model.pte", 1);
  try {
    InstanceHandle instance(program, "forward");
    ADD_FAILURE() << "a CPU instance accepted device-planned buffers";
  } catch (const BridgeError& e) {
    EXPECT_EQ(e.name(), "NotSupported");
    EXPECT_NE(std::string(e.what()).find("is planned on a CUDA device: the program runs on a GPU only"),
              std::string::npos)
        << e.what();
  }
}

TEST(Sha256, KnownDigests) {
  EXPECT_EQ(etserve::Sha256::hex("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(etserve::Sha256::hex("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Streamed in uneven pieces across block boundaries.
  etserve::Sha256 sha;
  const std::string a(1000, 'a');
  for (int i = 0; i < 1000; ++i) sha.update(a.data(), a.size());
  std::string hex;
  for (uint8_t b : sha.finish()) {
    static constexpr char kDigits[] = "0123456789abcdef";
    hex += kDigits[b >> 4];
    hex += kDigits[b & 15];
  }
  EXPECT_EQ(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// XNNPACK shares packed weights across programs by the key a file declares for each weight; a
// weight whose bytes do not hash to its key would change the answers of another model.
TEST(WeightKeys, AWeightThatDoesNotHashToItsKeyIsRefused) {
  std::string bytes = read_file(kDemoXnnpack);
  ASSERT_GT(bytes.size(), 5446u);
  bytes[5446] = static_cast<char>(bytes[5446] ^ 0xad);  // inside the first layer's weights
  const auto error = load_error(temp_file("flipped-weight.pte", bytes));
  EXPECT_EQ(error.name(), "InvalidProgram");
  EXPECT_NE(std::string(error.what()).find("does not hash to its key"), std::string::npos) << error.what();
}

TEST(WeightKeys, OnlyProgramsWhoseKeysAreAllHashesShareTheirPackedWeights) {
  EXPECT_TRUE(ProgramHandle::open(kDemoXnnpack, 1)->shares_packed_weights());
  // Weights named after the module (net.0.weight) could be another program's names too.
  EXPECT_FALSE(ProgramHandle::open(kPortablePte, 1, {kPortablePtd})->shares_packed_weights());
  EXPECT_TRUE(ProgramHandle::open(kXnnpackPte, 1, {kXnnpackPtd})->shares_packed_weights());
}

// Programs exported with MemoryPlanningPass(alloc_graph_input=False, alloc_graph_output=False):
// ExecuTorch reads the caller's input where it lies and writes each output into the sink's memory.
namespace {

const std::string kUnplanned = kRoot + "/src/test/resources/models/unplanned-";

// Memory the sink hands out per output, and whether each output arrived already in it.
struct RecordingSink : etserve::OutputSink {
  std::vector<std::vector<uint8_t>> memory;
  std::vector<bool> reserved, in_place;
  std::vector<std::vector<int64_t>> sizes;
  void begin(size_t count) override {
    memory.assign(count, {});
    reserved.assign(count, false);
    in_place.assign(count, false);
    sizes.assign(count, {});
  }
  uint8_t* reserve(size_t index, size_t nbytes) override {
    memory.at(index).assign(nbytes, 0xEE);
    reserved[index] = true;
    return memory[index].data();
  }
  void accept(size_t index, int, const std::vector<int64_t>& shape, const uint8_t* data, size_t nbytes) override {
    in_place.at(index) = reserved[index] && data == memory[index].data();
    if (!in_place[index]) memory[index].assign(data, data + nbytes);
    memory[index].resize(nbytes);
    sizes[index] = shape;
  }
  const float* floats(size_t index) const { return reinterpret_cast<const float*>(memory.at(index).data()); }
};

// 64-byte aligned floats, as a pooled direct buffer's are.
struct AlignedFloats {
  explicit AlignedFloats(size_t n) : data(static_cast<float*>(std::aligned_alloc(64, (n * 4 + 63) / 64 * 64))), size(n) {}
  ~AlignedFloats() { std::free(data); }
  float* data;
  size_t size;
};

}  // namespace

TEST(Unplanned, TheMethodReadsTheCallersInputAndWritesIntoTheSinksMemoryCopyingNothing) {
  auto program = ProgramHandle::open(kUnplanned + "affine/1/model.pte", 1);
  InstanceHandle instance(program, "forward");
  EXPECT_FALSE(instance.signature().inputs[0].planned);
  EXPECT_FALSE(instance.signature().outputs[0].planned);
  AlignedFloats x(4 * 3 * 8 * 8);
  for (int call = 0; call < 3; ++call) {
    for (size_t i = 0; i < x.size; ++i) x.data[i] = 0.25f * static_cast<float>(i % 37) - 3.0f + call;
    RecordingSink sink;
    instance.execute({InputView{x.data, x.size * 4, kFloat, {4, 3, 8, 8}}}, StreamSelection{}, sink);
    ASSERT_TRUE(sink.in_place[0]) << "call " << call << ": the output was copied, not written in place";
    ASSERT_EQ(sink.sizes[0], (std::vector<int64_t>{4, 3, 8, 8}));
    for (size_t i = 0; i < x.size; ++i) ASSERT_EQ(sink.floats(0)[i], 2.0f * x.data[i] + 1.0f) << i;
  }
  EXPECT_EQ(instance.stats().copied_bytes, 0);

  // The planned demo program copies its input in and its output out, every call.
  InstanceHandle demo(ProgramHandle::open(kDemo, 1), "forward");
  EXPECT_TRUE(demo.signature().inputs[0].planned);
  auto d = demo_input();
  RecordingSink sink;
  demo.execute({InputView{d.data(), d.size() * 4, kFloat, {1, 16}}}, StreamSelection{}, sink);
  EXPECT_FALSE(sink.in_place[0]);
  EXPECT_EQ(demo.stats().copied_bytes, 16 * 4 + 4 * 4);
}

TEST(Unplanned, EachCallWritesOnlyTheMemoryOfThatCall) {
  // The memory of an earlier call went back to its request: a later call must never write it.
  auto program = ProgramHandle::open(kUnplanned + "affine/1/model.pte", 1);
  InstanceHandle instance(program, "forward");
  AlignedFloats x(4 * 3 * 8 * 8);
  for (size_t i = 0; i < x.size; ++i) x.data[i] = static_cast<float>(i);
  RecordingSink first, second;
  instance.execute({InputView{x.data, x.size * 4, kFloat, {4, 3, 8, 8}}}, StreamSelection{}, first);
  const auto before = first.memory[0];
  for (size_t i = 0; i < x.size; ++i) x.data[i] = -1.0f;
  instance.execute({InputView{x.data, x.size * 4, kFloat, {4, 3, 8, 8}}}, StreamSelection{}, second);
  EXPECT_EQ(first.memory[0], before);
  EXPECT_EQ(second.floats(0)[0], -1.0f);
  EXPECT_EQ(first.floats(0)[5], 11.0f);
}

TEST(Unplanned, AMisalignedInputGoesThroughTheInstancesAlignedMemoryAndStaysRight) {
  auto program = ProgramHandle::open(kUnplanned + "affine/1/model.pte", 1);
  InstanceHandle instance(program, "forward");
  const size_t n = 4 * 3 * 8 * 8;
  AlignedFloats storage(n + 1);
  float* x = storage.data + 1;  // 4 bytes past a 64-byte boundary
  for (size_t i = 0; i < n; ++i) x[i] = static_cast<float>(i) * 0.5f;
  RecordingSink sink;
  instance.execute({InputView{x, n * 4, kFloat, {4, 3, 8, 8}}}, StreamSelection{}, sink);
  EXPECT_TRUE(sink.in_place[0]);
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(sink.floats(0)[i], 2.0f * x[i] + 1.0f) << i;
  EXPECT_EQ(instance.stats().copied_bytes, static_cast<int64_t>(n * 4));
}

TEST(Unplanned, ADynamicBatchAgreesWithThePlannedExportOfTheSameModule) {
  // Same seeded module exported with and without planned inputs and outputs.
  InstanceHandle planned(ProgramHandle::open(kDynamic, 1), "forward");
  InstanceHandle unplanned(ProgramHandle::open(kUnplanned + "dynamic-batch/1/model.pte", 1), "forward");
  EXPECT_FALSE(unplanned.signature().inputs[0].planned);
  EXPECT_NE(unplanned.signature().outputs[0].dynamism, 0);
  AlignedFloats x(32 * 16);
  for (size_t i = 0; i < x.size; ++i) x.data[i] = std::sin(0.37f * static_cast<float>(i));
  for (int64_t batch : {5, 1, 32, 3}) {
    InputView in{x.data, x.size * 4, kFloat, {batch, 16}};
    RecordingSink a, b;
    planned.execute({in}, StreamSelection{}, a);
    unplanned.execute({in}, StreamSelection{}, b);
    ASSERT_EQ(b.sizes[0], (std::vector<int64_t>{batch, 4}));
    ASSERT_EQ(b.memory[0].size(), static_cast<size_t>(batch * 4 * 4));
    float magnitude = 0;
    for (int64_t i = 0; i < batch * 4; ++i) {
      ASSERT_NEAR(a.floats(0)[i], b.floats(0)[i], 1e-5f) << "batch " << batch << " element " << i;
      magnitude += std::fabs(b.floats(0)[i]);
    }
    EXPECT_GT(magnitude, 0.0f);
  }
  // A dynamic output's size is known only after the call: it is copied from the instance's
  // bound-sized memory; the input was still read in place.
  const size_t out_bytes = (5 + 1 + 32 + 3) * 4 * 4;
  EXPECT_EQ(unplanned.stats().copied_bytes, static_cast<int64_t>(out_bytes));
}

TEST(Unplanned, AnOutputThatIsTheInputItselfIsCopiedFromTheInput) {
  auto program = ProgramHandle::open(kUnplanned + "passthrough/1/model.pte", 1);
  InstanceHandle instance(program, "forward");
  AlignedFloats x(10);
  for (size_t i = 0; i < x.size; ++i) x.data[i] = 1.5f * static_cast<float>(i) - 4.0f;
  RecordingSink sink;
  instance.execute({InputView{x.data, x.size * 4, kFloat, {2, 5}}}, StreamSelection{}, sink);
  ASSERT_EQ(sink.memory.size(), 2u);
  EXPECT_FALSE(sink.in_place[0]);  // the program returned the input, not the sink's memory
  EXPECT_TRUE(sink.in_place[1]);
  for (size_t i = 0; i < x.size; ++i) {
    EXPECT_EQ(sink.floats(0)[i], x.data[i]) << i;
    EXPECT_EQ(sink.floats(1)[i], x.data[i] * 3.0f - 0.5f) << i;
  }
}
