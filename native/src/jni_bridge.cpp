// JNI face of the bridge: io.etserve.runtime.NativeBridge. Thin by design: it converts
// Java values, calls bridge_core, and turns every C++ failure into an ExecuTorchException.
#include <jni.h>

#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <vector>

#include "bridge_core.h"
#include "native_log.h"

namespace {

using etserve::BridgeError;
using etserve::InstanceHandle;
using etserve::LogCapture;
using etserve::ProgramHandle;

constexpr const char* kExceptionClass = "io/etserve/runtime/ExecuTorchException";

// Thrown out of a conversion helper when a JNI call has already raised a Java exception.
struct PendingJavaException {};

// Text from native code (ExecuTorch's log, names read from a .pte) as a Java string. It is
// standard UTF-8 at best and arbitrary bytes at worst, where NewStringUTF takes only valid
// modified UTF-8: decoded here, each byte that starts no valid sequence read as U+FFFD.
jstring new_string(JNIEnv* env, const std::string& text) {
  std::u16string utf16;
  utf16.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    uint32_t cp = 0xFFFD;
    size_t len = 1;
    size_t need = b < 0x80 ? 0 : (b >> 5) == 0x6 ? 1 : (b >> 4) == 0xE ? 2 : (b >> 3) == 0x1E ? 3 : 4;
    if (need == 0) {
      cp = b;
    } else if (need < 4 && i + need < n) {
      uint32_t v = b & (0x3F >> need);
      bool ok = true;
      for (size_t k = 1; k <= need; ++k) {
        if ((p[i + k] & 0xC0) != 0x80) {
          ok = false;
          break;
        }
        v = (v << 6) | (p[i + k] & 0x3F);
      }
      static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
      if (ok && v >= kMin[need] && v <= 0x10FFFF && (v < 0xD800 || v > 0xDFFF)) {
        cp = v;
        len = need + 1;
      }
    }
    if (cp >= 0x10000) {
      utf16.push_back(static_cast<char16_t>(0xD800 + ((cp - 0x10000) >> 10)));
      utf16.push_back(static_cast<char16_t>(0xDC00 + ((cp - 0x10000) & 0x3FF)));
    } else {
      utf16.push_back(static_cast<char16_t>(cp));
    }
    i += len;
  }
  return env->NewString(reinterpret_cast<const jchar*>(utf16.data()), static_cast<jsize>(utf16.size()));
}

void throw_java(JNIEnv* env, const std::string& name, int code, const std::string& message,
                const std::string& log) {
  if (env->ExceptionCheck()) return;
  jclass cls = env->FindClass(kExceptionClass);
  if (cls == nullptr) return;  // NoClassDefFoundError is pending
  jmethodID ctor = env->GetMethodID(
      cls, "<init>", "(Ljava/lang/String;ILjava/lang/String;Ljava/lang/String;)V");
  if (ctor == nullptr) return;
  jstring jname = new_string(env, name);
  if (jname == nullptr) return;
  jstring jmsg = new_string(env, message);
  if (jmsg == nullptr) return;
  jstring jlog = new_string(env, log);
  if (jlog == nullptr) return;
  auto ex = static_cast<jthrowable>(env->NewObject(cls, ctor, jname, code, jmsg, jlog));
  if (ex != nullptr) env->Throw(ex);
}

// Runs `body` with ExecuTorch's log captured; converts every failure into a Java exception.
template <typename R, typename F>
R guarded(JNIEnv* env, R failure_value, F&& body) {
  // Nothing may escape into the JVM: even building the error report is guarded.
  try {
    etserve::install_log_hook();
    LogCapture capture;
    try {
      return body();
    } catch (const PendingJavaException&) {
    } catch (const BridgeError& e) {
      throw_java(env, e.name(), e.code(), e.what(),
                 e.native_log().empty() ? capture.text() : e.native_log());
    } catch (const std::bad_alloc&) {
      throw_java(env, "MemoryAllocationFailed", 0x21, "native allocation failed", capture.text());
    } catch (const std::exception& e) {
      throw_java(env, "Internal", 0x01, e.what(), capture.text());
    } catch (...) {
      throw_java(env, "Internal", 0x01, "unknown native failure", capture.text());
    }
  } catch (...) {
    if (!env->ExceptionCheck()) {
      jclass oom = env->FindClass("java/lang/OutOfMemoryError");
      if (oom != nullptr) env->ThrowNew(oom, "etserve bridge: failure while reporting a native error");
    }
  }
  return failure_value;
}

void check(JNIEnv* env) {
  if (env->ExceptionCheck()) throw PendingJavaException{};
}

// A Java string (a path, a method name) as standard UTF-8, which the file system and ExecuTorch
// read: GetStringUTFChars would give modified UTF-8, in which a character outside the Basic
// Multilingual Plane (an emoji in a directory name) is two 3-byte halves no file is named with.
std::string to_string(JNIEnv* env, jstring s) {
  if (s == nullptr) throw BridgeError("InvalidArgument", 0x12, "null string argument");
  const jsize n = env->GetStringLength(s);
  const jchar* chars = env->GetStringChars(s, nullptr);
  if (chars == nullptr) throw PendingJavaException{};
  std::string out;
  out.reserve(static_cast<size_t>(n));
  for (jsize i = 0; i < n; ++i) {
    uint32_t cp = chars[i];
    if (cp >= 0xD800 && cp <= 0xDBFF && i + 1 < n && chars[i + 1] >= 0xDC00 && chars[i + 1] <= 0xDFFF) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (chars[i + 1] - 0xDC00);
      ++i;
    } else if (cp >= 0xD800 && cp <= 0xDFFF) {
      cp = 0xFFFD;  // a lone surrogate names nothing
    } else if (cp == 0) {
      env->ReleaseStringChars(s, chars);
      // C strings end there: "forward\0x" would name the method "forward".
      throw BridgeError("InvalidArgument", 0x12, "a string argument contains a NUL character");
    }
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  env->ReleaseStringChars(s, chars);
  return out;
}

jobjectArray to_java(JNIEnv* env, const std::vector<std::string>& strings) {
  jclass string_class = env->FindClass("java/lang/String");
  check(env);
  jobjectArray arr = env->NewObjectArray(static_cast<jsize>(strings.size()), string_class, nullptr);
  check(env);
  for (size_t i = 0; i < strings.size(); ++i) {
    jstring js = new_string(env, strings[i]);
    check(env);
    env->SetObjectArrayElement(arr, static_cast<jsize>(i), js);
    env->DeleteLocalRef(js);
  }
  return arr;
}

jlongArray to_java(JNIEnv* env, const std::vector<int64_t>& values) {
  jlongArray arr = env->NewLongArray(static_cast<jsize>(values.size()));
  check(env);
  env->SetLongArrayRegion(arr, 0, static_cast<jsize>(values.size()),
                          reinterpret_cast<const jlong*>(values.data()));
  return arr;
}

std::shared_ptr<ProgramHandle>& program_from(jlong handle) {
  if (handle == 0) throw BridgeError("InvalidState", 0x02, "program is closed");
  return *reinterpret_cast<std::shared_ptr<ProgramHandle>*>(handle);
}

InstanceHandle& instance_from(jlong handle) {
  if (handle == 0) throw BridgeError("InvalidState", 0x02, "instance is closed");
  return *reinterpret_cast<InstanceHandle*>(handle);
}

void encode(std::vector<int64_t>& out, const std::vector<etserve::TensorSpec>& specs) {
  out.push_back(static_cast<int64_t>(specs.size()));
  for (const auto& s : specs) {
    out.push_back(s.tag);
    out.push_back(s.dtype);
    out.push_back(s.dynamism);
    out.push_back(s.planned ? 1 : 0);
    out.push_back(static_cast<int64_t>(s.sizes.size()));
    out.insert(out.end(), s.sizes.begin(), s.sizes.end());
  }
}

// Field and method IDs of the Java types the bridge reads and writes on every call (names as in
// io.etserve.runtime.ExecutionCall, ExecutionInput, ExecutionOutput, OutputBuffers and
// CompletionWaits), looked up once.
struct JavaTypes {
  // ExecutionCall
  jfieldID call_inputs, call_input_count, call_buffers, call_stream_mode, call_stream, call_device,
      call_completion_wait, call_sleep_slice_micros, call_wait_timeout_millis, call_wait_ended;
  // ExecutionInput
  jfieldID input_data, input_scalar_type, input_shape;
  jmethodID allocate;  // OutputBuffers.allocate(int, long)
  jclass output_class;  // ExecutionOutput (a global reference)
  jmethodID output_init;
  jclass waits_class;  // CompletionWaits (a global reference)
  jmethodID waits_init;
};

jclass find_class(JNIEnv* env, const char* name) {
  jclass c = env->FindClass(name);
  check(env);
  return c;
}

jfieldID field(JNIEnv* env, jclass c, const char* name, const char* sig) {
  jfieldID f = env->GetFieldID(c, name, sig);
  check(env);
  return f;
}

jmethodID method(JNIEnv* env, jclass c, const char* name, const char* sig) {
  jmethodID m = env->GetMethodID(c, name, sig);
  check(env);
  return m;
}

jclass global(JNIEnv* env, jclass c) {
  auto g = static_cast<jclass>(env->NewGlobalRef(c));
  env->DeleteLocalRef(c);
  if (g == nullptr) throw std::bad_alloc();
  return g;
}

JavaTypes look_up_java_types(JNIEnv* env) {
  JavaTypes t{};
  jclass call = find_class(env, "io/etserve/runtime/ExecutionCall");
  t.call_inputs = field(env, call, "inputs", "[Lio/etserve/runtime/ExecutionInput;");
  t.call_input_count = field(env, call, "inputCount", "I");
  t.call_buffers = field(env, call, "buffers", "Lio/etserve/runtime/OutputBuffers;");
  t.call_stream_mode = field(env, call, "streamMode", "I");
  t.call_stream = field(env, call, "stream", "J");
  t.call_device = field(env, call, "device", "I");
  t.call_completion_wait = field(env, call, "completionWait", "I");
  t.call_sleep_slice_micros = field(env, call, "sleepSliceMicros", "I");
  t.call_wait_timeout_millis = field(env, call, "waitTimeoutMillis", "I");
  t.call_wait_ended = field(env, call, "waitEnded", "I");
  env->DeleteLocalRef(call);
  jclass input = find_class(env, "io/etserve/runtime/ExecutionInput");
  t.input_data = field(env, input, "data", "Ljava/nio/ByteBuffer;");
  t.input_scalar_type = field(env, input, "scalarType", "I");
  t.input_shape = field(env, input, "shape", "[J");
  env->DeleteLocalRef(input);
  jclass buffers = find_class(env, "io/etserve/runtime/OutputBuffers");
  t.allocate = method(env, buffers, "allocate", "(IJ)Ljava/nio/ByteBuffer;");
  env->DeleteLocalRef(buffers);
  t.output_class = find_class(env, "io/etserve/runtime/ExecutionOutput");
  t.output_init = method(env, t.output_class, "<init>", "(I[JLjava/nio/ByteBuffer;)V");
  t.output_class = global(env, t.output_class);
  t.waits_class = find_class(env, "io/etserve/runtime/CompletionWaits");
  t.waits_init = method(env, t.waits_class, "<init>", "(JJJJJ)V");
  t.waits_class = global(env, t.waits_class);
  return t;
}

const JavaTypes& java_types(JNIEnv* env) {
  // A failed lookup throws out of the initializer: the next call tries again.
  static const JavaTypes types = look_up_java_types(env);
  return types;
}

// Reads ExecutionCall's inputs: each input's direct buffer in place, its dtype and shape.
std::vector<etserve::InputView> read_inputs(JNIEnv* env, const JavaTypes& t, jobject call) {
  auto array = static_cast<jobjectArray>(env->GetObjectField(call, t.call_inputs));
  const jint n = env->GetIntField(call, t.call_input_count);
  if (array == nullptr || n < 0 || n > env->GetArrayLength(array)) {
    throw BridgeError("InvalidArgument", 0x12, "the call's inputs do not hold its input count");
  }
  std::vector<etserve::InputView> inputs(n);
  for (jint i = 0; i < n; ++i) {
    jobject in = env->GetObjectArrayElement(array, i);
    check(env);
    if (in == nullptr) throw BridgeError("InvalidArgument", 0x12, "input " + std::to_string(i) + " is null");
    jobject buf = env->GetObjectField(in, t.input_data);
    auto shape = static_cast<jlongArray>(env->GetObjectField(in, t.input_shape));
    if (buf == nullptr || shape == nullptr) {
      throw BridgeError("InvalidArgument", 0x12, "input " + std::to_string(i) + " is null");
    }
    void* address = env->GetDirectBufferAddress(buf);
    const jlong capacity = env->GetDirectBufferCapacity(buf);
    if (capacity < 0 || (address == nullptr && capacity > 0)) {
      // (A buffer with capacity and no address, a segment at address 0, would be read as empty storage.)
      throw BridgeError("InvalidArgument", 0x12, "input " + std::to_string(i) + " is not a direct ByteBuffer");
    }
    inputs[i].data = address;
    inputs[i].capacity = static_cast<size_t>(capacity);
    inputs[i].dtype = env->GetIntField(in, t.input_scalar_type);
    const jsize rank = env->GetArrayLength(shape);
    inputs[i].sizes.resize(rank);
    env->GetLongArrayRegion(shape, 0, rank, reinterpret_cast<jlong*>(inputs[i].sizes.data()));
    env->DeleteLocalRef(buf);
    env->DeleteLocalRef(shape);
    env->DeleteLocalRef(in);
  }
  env->DeleteLocalRef(array);
  return inputs;
}

// Reads ExecutionCall's stream options (StreamSelection's enums as ordinals).
etserve::StreamSelection read_stream(JNIEnv* env, const JavaTypes& t, jobject call) {
  const jint mode = env->GetIntField(call, t.call_stream_mode);
  const jint wait = env->GetIntField(call, t.call_completion_wait);
  if (mode < 0 || mode > 2 || wait < 0 || wait > 2) {
    throw BridgeError("InvalidArgument", 0x12, "unknown stream mode");
  }
  etserve::StreamSelection selection;
  selection.mode = static_cast<etserve::StreamMode>(mode);
  selection.wait = static_cast<etserve::CompletionWait>(wait);
  selection.handle = static_cast<uintptr_t>(env->GetLongField(call, t.call_stream));
  selection.device = env->GetIntField(call, t.call_device);
  selection.sleep_slice_ns = static_cast<int64_t>(env->GetIntField(call, t.call_sleep_slice_micros)) * 1000;
  selection.timeout_ns = static_cast<int64_t>(env->GetIntField(call, t.call_wait_timeout_millis)) * 1'000'000;
  return selection;
}

// Each output lands in a direct buffer that Java hands out (OutputBuffers.allocate, usually a
// pooled one) and writes to the response from: written there by the method itself when the
// program leaves the output unplanned (taken before the forward, `reserve`), else copied once out
// of the Module's memory. Java-owned, so it never aliases the Module once the call returns.
class JavaOutputs : public etserve::OutputSink {
 public:
  JavaOutputs(JNIEnv* env, const JavaTypes& types, jobject buffers) : env_(env), t_(types), buffers_(buffers) {}

  ~JavaOutputs() override {
    for (jobject b : reserved_) {
      if (b != nullptr) env_->DeleteLocalRef(b);
    }
  }

  void begin(size_t count) override {
    if (buffers_ == nullptr) throw BridgeError("InvalidArgument", 0x12, "the call has no output buffers");
    result_ = env_->NewObjectArray(static_cast<jsize>(count), t_.output_class, nullptr);
    check(env_);
    // Reserved buffers stay referenced until their output is accepted.
    if (env_->EnsureLocalCapacity(static_cast<jint>(count) + 8) != 0) throw PendingJavaException{};
    reserved_.assign(count, nullptr);
    addresses_.assign(count, nullptr);
  }

  uint8_t* reserve(size_t index, size_t nbytes) override {
    if (index >= reserved_.size() || reserved_[index] != nullptr) {
      throw BridgeError("Internal", 0x01, "output " + std::to_string(index) + " reserved twice");
    }
    reserved_[index] = buffer_for(index, nbytes, addresses_[index]);
    return addresses_[index];
  }

  void accept(size_t index, int dtype, const std::vector<int64_t>& sizes, const uint8_t* data,
              size_t nbytes) override {
    const auto i = static_cast<jsize>(index);
    jobject buffer = reserved_.at(index);
    uint8_t* address = addresses_[index];
    reserved_[index] = nullptr;
    if (buffer == nullptr) buffer = buffer_for(index, nbytes, address);
    if (nbytes > 0 && data != address) std::memcpy(address, data, nbytes);
    jlongArray shape = to_java(env_, sizes);
    jobject output = env_->NewObject(t_.output_class, t_.output_init, static_cast<jint>(dtype), shape, buffer);
    check(env_);
    env_->SetObjectArrayElement(result_, i, output);
    env_->DeleteLocalRef(output);
    env_->DeleteLocalRef(shape);
    env_->DeleteLocalRef(buffer);
  }

  jobjectArray result() const { return result_; }

 private:
  // A direct buffer of at least `nbytes` from the call's allocator; sets `address`.
  jobject buffer_for(size_t index, size_t nbytes, uint8_t*& address) {
    jobject buffer = env_->CallObjectMethod(buffers_, t_.allocate, static_cast<jint>(index), static_cast<jlong>(nbytes));
    check(env_);  // the allocator threw (OutOfMemoryError, for one)
    address = buffer == nullptr ? nullptr : static_cast<uint8_t*>(env_->GetDirectBufferAddress(buffer));
    const jlong capacity = buffer == nullptr ? -1 : env_->GetDirectBufferCapacity(buffer);
    if (address == nullptr && nbytes > 0) {
      throw BridgeError("InvalidArgument", 0x12,
                        "the allocator gave output " + std::to_string(index) + " no direct buffer");
    }
    if (capacity < static_cast<jlong>(nbytes)) {
      throw BridgeError("InvalidArgument", 0x12,
                        "the allocator gave output " + std::to_string(index) + " " + std::to_string(capacity) +
                            " bytes for " + std::to_string(nbytes));
    }
    return buffer;
  }

  JNIEnv* env_;
  const JavaTypes& t_;
  jobject buffers_;
  jobjectArray result_ = nullptr;
  std::vector<jobject> reserved_;    // local references, until accept
  std::vector<uint8_t*> addresses_;
};

}  // namespace

extern "C" {

JNIEXPORT jlong JNICALL Java_io_etserve_runtime_NativeBridge_openProgram(JNIEnv* env, jclass,
                                                                         jstring path,
                                                                         jint verification,
                                                                         jobjectArray data_files) {
  return guarded<jlong>(env, 0, [&] {
    std::vector<std::string> files;
    const jsize n = data_files == nullptr ? 0 : env->GetArrayLength(data_files);
    for (jsize i = 0; i < n; ++i) {
      auto file = static_cast<jstring>(env->GetObjectArrayElement(data_files, i));
      check(env);
      files.push_back(to_string(env, file));
      env->DeleteLocalRef(file);
    }
    auto program = ProgramHandle::open(to_string(env, path), verification, files);
    return reinterpret_cast<jlong>(new std::shared_ptr<ProgramHandle>(std::move(program)));
  });
}

JNIEXPORT void JNICALL Java_io_etserve_runtime_NativeBridge_closeProgram(JNIEnv* env, jclass,
                                                                         jlong handle) {
  guarded<int>(env, 0, [&] {
    delete reinterpret_cast<std::shared_ptr<ProgramHandle>*>(handle);
    return 0;
  });
}

JNIEXPORT jobjectArray JNICALL Java_io_etserve_runtime_NativeBridge_methodNames(JNIEnv* env,
                                                                                jclass,
                                                                                jlong handle) {
  return guarded<jobjectArray>(env, nullptr,
                               [&] { return to_java(env, program_from(handle)->method_names()); });
}

JNIEXPORT jlongArray JNICALL Java_io_etserve_runtime_NativeBridge_methodSignature(
    JNIEnv* env, jclass, jlong handle, jstring method) {
  return guarded<jlongArray>(env, nullptr, [&] {
    const auto sig = program_from(handle)->signature(to_string(env, method));
    std::vector<int64_t> encoded;
    encode(encoded, sig.inputs);
    encode(encoded, sig.outputs);
    encoded.push_back(static_cast<int64_t>(sig.planned_buffers.size()));
    encoded.insert(encoded.end(), sig.planned_buffers.begin(), sig.planned_buffers.end());
    return to_java(env, encoded);
  });
}

JNIEXPORT jobjectArray JNICALL Java_io_etserve_runtime_NativeBridge_methodBackends(
    JNIEnv* env, jclass, jlong handle, jstring method) {
  return guarded<jobjectArray>(env, nullptr, [&] {
    return to_java(env, program_from(handle)->signature(to_string(env, method)).backends);
  });
}

JNIEXPORT jlong JNICALL Java_io_etserve_runtime_NativeBridge_openInstance(JNIEnv* env, jclass,
                                                                          jlong program,
                                                                          jstring method,
                                                                          jint device,
                                                                          jboolean callerThreadOnly) {
  return guarded<jlong>(env, 0, [&] {
    auto* instance = new InstanceHandle(program_from(program), to_string(env, method), device,
                                        callerThreadOnly == JNI_TRUE);
    return reinterpret_cast<jlong>(instance);
  });
}

JNIEXPORT jlongArray JNICALL Java_io_etserve_runtime_NativeBridge_instanceSignature(
    JNIEnv* env, jclass, jlong handle) {
  return guarded<jlongArray>(env, nullptr, [&] {
    const auto& sig = instance_from(handle).signature();
    std::vector<int64_t> encoded;
    encode(encoded, sig.inputs);
    encode(encoded, sig.outputs);
    return to_java(env, encoded);
  });
}

JNIEXPORT jobject JNICALL Java_io_etserve_runtime_NativeBridge_instanceStats(JNIEnv* env, jclass,
                                                                             jlong handle) {
  return guarded<jobject>(env, nullptr, [&]() -> jobject {
    const auto stats = instance_from(handle).stats();
    const auto& t = java_types(env);
    const auto& w = stats.waits;
    jobject waits = env->NewObject(t.waits_class, t.waits_init, static_cast<jlong>(w.at_start),
                                   static_cast<jlong>(w.overslept), static_cast<jlong>(w.in_spin),
                                   static_cast<jlong>(w.in_backoff), static_cast<jlong>(stats.last_wait_end_ns));
    check(env);
    return waits;
  });
}

JNIEXPORT void JNICALL Java_io_etserve_runtime_NativeBridge_closeInstance(JNIEnv* env, jclass,
                                                                          jlong handle) {
  guarded<int>(env, 0, [&] {
    delete reinterpret_cast<InstanceHandle*>(handle);
    return 0;
  });
}

JNIEXPORT jobjectArray JNICALL Java_io_etserve_runtime_NativeBridge_execute(JNIEnv* env, jclass,
                                                                            jlong handle, jobject call) {
  return guarded<jobjectArray>(env, nullptr, [&]() -> jobjectArray {
    InstanceHandle& instance = instance_from(handle);
    if (call == nullptr) throw BridgeError("InvalidArgument", 0x12, "null call");
    const auto& t = java_types(env);
    const auto inputs = read_inputs(env, t, call);
    const auto selection = read_stream(env, t, call);
    jobject buffers = env->GetObjectField(call, t.call_buffers);
    JavaOutputs outputs(env, t, buffers);
    const auto ended = instance.execute(inputs, selection, outputs);
    env->SetIntField(call, t.call_wait_ended, static_cast<jint>(ended));
    env->DeleteLocalRef(buffers);
    return outputs.result();
  });
}

JNIEXPORT jobjectArray JNICALL Java_io_etserve_runtime_NativeBridge_callerStreamDefiners(
    JNIEnv* env, jclass) {
  return guarded<jobjectArray>(env, nullptr, [&] {
    std::vector<std::string> flat;
    for (const auto& d : etserve::caller_stream_definers()) {
      flat.push_back(d.path);
      flat.push_back(d.soname);
    }
    return to_java(env, flat);
  });
}

JNIEXPORT jlongArray JNICALL Java_io_etserve_runtime_NativeBridge_observeCallerStream(JNIEnv* env,
                                                                                      jclass) {
  return guarded<jlongArray>(env, nullptr, [&] {
    const auto seen = etserve::observe_caller_stream();
    return to_java(env, std::vector<int64_t>{seen.has_value ? 1 : 0,
                                             static_cast<int64_t>(seen.handle)});
  });
}

JNIEXPORT jobjectArray JNICALL Java_io_etserve_runtime_NativeBridge_registeredBackends(JNIEnv* env,
                                                                                       jclass) {
  return guarded<jobjectArray>(env, nullptr,
                               [&] { return to_java(env, etserve::registered_backends()); });
}

JNIEXPORT jint JNICALL Java_io_etserve_runtime_NativeBridge_cpuThreads(JNIEnv* env, jclass,
                                                                       jint requested) {
  return guarded<jint>(env, -1, [&] { return etserve::cpu_threadpool_size(requested); });
}

}  // extern "C"
