#include "native_log.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include <executorch/runtime/platform/platform.h>
#include <executorch/runtime/platform/runtime.h>

namespace etserve {
namespace {

// The innermost capture on this thread (captures nest when a bridge call re-enters).
thread_local LogCapture* current_capture = nullptr;

// Bounded so a chatty delegate cannot grow a request's error message without limit.
constexpr size_t kMaxCapturedBytes = 16 * 1024;

void emit(et_timestamp_t, et_pal_log_level_t level, const char* filename, const char*,
          size_t line, const char* message, size_t length) {
  if (current_capture != nullptr) {
    current_capture->append(static_cast<char>(level), message, length);
    return;
  }
  std::fprintf(stderr, "[executorch %c %s:%zu] %.*s\n", static_cast<char>(level),
               filename ? filename : "?", line, static_cast<int>(length), message);
}

}  // namespace

LogCapture::LogCapture() : outer_(current_capture) { current_capture = this; }

LogCapture::~LogCapture() { current_capture = outer_; }

void LogCapture::append(char level, const char* message, size_t length) {
  // Room for the separator, the level and a space, then as much of the message as fits.
  if (text_.size() + 3 >= kMaxCapturedBytes) return;
  if (!text_.empty()) text_.push_back('\n');
  text_.push_back(level);
  text_.push_back(' ');
  size_t take = std::min(length, kMaxCapturedBytes - text_.size());
  // Never cut a UTF-8 sequence: the cut character would read as U+FFFD in Java.
  if (take < length) {
    while (take > 0 && (static_cast<unsigned char>(message[take]) & 0xC0) == 0x80) --take;
  }
  text_.append(message, take);
  while (!text_.empty() && (text_.back() == '\n' || text_.back() == '\r')) text_.pop_back();
}

void install_log_hook() {
  static std::once_flag once;
  std::call_once(once, [] {
    executorch::runtime::runtime_init();
    executorch::runtime::register_pal(
        executorch::runtime::PalImpl::create(&emit, __FILE__));
  });
}

}  // namespace etserve
