// Collects ExecuTorch's log lines emitted on this thread while a bridge call runs, so the
// Java exception can carry them. Outside a capture, lines go to stderr as usual.
#pragma once

#include <string>

namespace etserve {

class LogCapture {
 public:
  LogCapture();
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  const std::string& text() const { return text_; }
  void append(char level, const char* message, size_t length);

 private:
  std::string text_;
  LogCapture* outer_;
};

// Installs the log hook into ExecuTorch's PAL. Idempotent; called once per process.
void install_log_hook();

}  // namespace etserve
