// The caller-stream semantics the service relies on, pinned against ExecuTorch's library
// (the same cases upstream tests), and the loaded-object scan behind the health indicator.
#include <dlfcn.h>

#include <thread>

#include <gtest/gtest.h>

#include "bridge_core.h"
#include "etserve/caller_stream_api.h"

namespace {

using executorch::extension::cuda::CallerStreamGuard;
using executorch::extension::cuda::getCallerStream;

cudaStream_t handle(uintptr_t v) { return reinterpret_cast<cudaStream_t>(v); }

TEST(CallerStream, NoGuardMeansNoSelection) { EXPECT_FALSE(getCallerStream().has_value()); }

TEST(CallerStream, GuardSelectsAndRestoresOnExit) {
  {
    CallerStreamGuard guard(handle(0x1234));
    ASSERT_TRUE(getCallerStream().has_value());
    EXPECT_EQ(*getCallerStream(), handle(0x1234));
  }
  EXPECT_FALSE(getCallerStream().has_value());
}

TEST(CallerStream, ExplicitNullStreamStaysEngaged) {
  CallerStreamGuard guard(nullptr);
  ASSERT_TRUE(getCallerStream().has_value());
  EXPECT_EQ(*getCallerStream(), nullptr);
}

TEST(CallerStream, ExplicitPerThreadStreamStaysEngaged) {
  CallerStreamGuard guard(handle(0x2));  // cudaStreamPerThread
  ASSERT_TRUE(getCallerStream().has_value());
  EXPECT_EQ(*getCallerStream(), handle(0x2));
}

TEST(CallerStream, NestedGuardsRestoreTheOuterOne) {
  CallerStreamGuard outer(handle(0xA0));
  {
    CallerStreamGuard inner(handle(0xB0));
    EXPECT_EQ(*getCallerStream(), handle(0xB0));
  }
  ASSERT_TRUE(getCallerStream().has_value());
  EXPECT_EQ(*getCallerStream(), handle(0xA0));
}

TEST(CallerStream, SelectionIsPerThread) {
  CallerStreamGuard guard(handle(0xC0));
  bool other_has_value = true;
  std::thread([&] { other_has_value = getCallerStream().has_value(); }).join();
  EXPECT_FALSE(other_has_value);
  EXPECT_EQ(*getCallerStream(), handle(0xC0));
}

TEST(CallerStream, BridgeObservesTheSameState) {
  EXPECT_FALSE(etserve::observe_caller_stream().has_value);
  CallerStreamGuard guard(handle(0xD0));
  const auto seen = etserve::observe_caller_stream();
  EXPECT_TRUE(seen.has_value);
  EXPECT_EQ(seen.handle, 0xD0u);
}

TEST(CallerStreamDefiners, ExactlyOneInThisProcess) {
  const auto definers = etserve::caller_stream_definers();
  ASSERT_EQ(definers.size(), 1u);
  EXPECT_NE(definers[0].path.find("extension_cuda"), std::string::npos) << definers[0].path;
  EXPECT_NE(definers[0].soname.find("extension_cuda.so"), std::string::npos) << definers[0].soname;
}

}  // namespace
