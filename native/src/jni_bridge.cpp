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

void throw_java(JNIEnv* env, const std::string& name, int code, const std::string& message,
                const std::string& log) {
  if (env->ExceptionCheck()) return;
  jclass cls = env->FindClass(kExceptionClass);
  if (cls == nullptr) return;  // NoClassDefFoundError is pending
  jmethodID ctor = env->GetMethodID(
      cls, "<init>", "(Ljava/lang/String;ILjava/lang/String;Ljava/lang/String;)V");
  if (ctor == nullptr) return;
  jstring jname = env->NewStringUTF(name.c_str());
  if (jname == nullptr) return;
  jstring jmsg = env->NewStringUTF(message.c_str());
  if (jmsg == nullptr) return;
  jstring jlog = env->NewStringUTF(log.c_str());
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

std::string to_string(JNIEnv* env, jstring s) {
  if (s == nullptr) throw BridgeError("InvalidArgument", 0x12, "null string argument");
  const char* chars = env->GetStringUTFChars(s, nullptr);
  if (chars == nullptr) throw PendingJavaException{};
  std::string out(chars);
  env->ReleaseStringUTFChars(s, chars);
  return out;
}

jobjectArray to_java(JNIEnv* env, const std::vector<std::string>& strings) {
  jclass string_class = env->FindClass("java/lang/String");
  check(env);
  jobjectArray arr = env->NewObjectArray(static_cast<jsize>(strings.size()), string_class, nullptr);
  check(env);
  for (size_t i = 0; i < strings.size(); ++i) {
    jstring js = env->NewStringUTF(strings[i].c_str());
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
    out.push_back(static_cast<int64_t>(s.sizes.size()));
    out.insert(out.end(), s.sizes.begin(), s.sizes.end());
  }
}

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
                                                                          jint device) {
  return guarded<jlong>(env, 0, [&] {
    auto* instance = new InstanceHandle(program_from(program), to_string(env, method), device);
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

JNIEXPORT jlongArray JNICALL Java_io_etserve_runtime_NativeBridge_instanceWaitStats(JNIEnv* env,
                                                                                   jclass, jlong handle) {
  return guarded<jlongArray>(env, nullptr, [&] {
    const auto& instance = instance_from(handle);
    const auto st = instance.wait_stats();
    const std::vector<int64_t> encoded{static_cast<int64_t>(st.done_at_start), static_cast<int64_t>(st.woke_done),
                                       static_cast<int64_t>(st.exact), static_cast<int64_t>(st.backoff),
                                       instance.last_wait_end_ns()};
    return to_java(env, encoded);
  });
}

JNIEXPORT jint JNICALL Java_io_etserve_runtime_NativeBridge_instanceLastWait(JNIEnv* env, jclass, jlong handle) {
  return guarded<jint>(env, 0, [&] { return static_cast<jint>(instance_from(handle).last_adaptive_wait()); });
}

JNIEXPORT void JNICALL Java_io_etserve_runtime_NativeBridge_closeInstance(JNIEnv* env, jclass,
                                                                          jlong handle) {
  guarded<int>(env, 0, [&] {
    delete reinterpret_cast<InstanceHandle*>(handle);
    return 0;
  });
}

JNIEXPORT jobjectArray JNICALL Java_io_etserve_runtime_NativeBridge_execute(
    JNIEnv* env, jclass, jlong handle, jobjectArray buffers, jintArray dtypes, jobjectArray shapes,
    jint stream_mode, jlong stream, jint device, jintArray out_dtypes, jobjectArray out_shapes,
    jobject out_buffers) {
  return guarded<jobjectArray>(env, nullptr, [&]() -> jobjectArray {
    InstanceHandle& instance = instance_from(handle);
    if (buffers == nullptr || dtypes == nullptr || shapes == nullptr) {
      throw BridgeError("InvalidArgument", 0x12, "null input arrays");
    }
    const jsize n = env->GetArrayLength(buffers);
    if (env->GetArrayLength(dtypes) != n || env->GetArrayLength(shapes) != n) {
      throw BridgeError("InvalidArgument", 0x12, "inputs, dtypes and shapes differ in length");
    }
    std::vector<jint> dtype_values(n);
    env->GetIntArrayRegion(dtypes, 0, n, dtype_values.data());
    std::vector<etserve::InputView> inputs(n);
    for (jsize i = 0; i < n; ++i) {
      jobject buf = env->GetObjectArrayElement(buffers, i);
      auto shape = static_cast<jlongArray>(env->GetObjectArrayElement(shapes, i));
      check(env);
      if (buf == nullptr || shape == nullptr) {
        throw BridgeError("InvalidArgument", 0x12, "input " + std::to_string(i) + " is null");
      }
      void* address = env->GetDirectBufferAddress(buf);
      const jlong capacity = env->GetDirectBufferCapacity(buf);
      if (capacity < 0) {
        throw BridgeError("InvalidArgument", 0x12,
                          "input " + std::to_string(i) + " is not a direct ByteBuffer");
      }
      inputs[i].data = address;
      inputs[i].capacity = static_cast<size_t>(capacity);
      inputs[i].dtype = dtype_values[i];
      const jsize rank = env->GetArrayLength(shape);
      inputs[i].sizes.resize(rank);
      env->GetLongArrayRegion(shape, 0, rank, reinterpret_cast<jlong*>(inputs[i].sizes.data()));
      env->DeleteLocalRef(buf);
      env->DeleteLocalRef(shape);
    }

    // stream_mode: the StreamMode in the low byte, the CompletionWait in the next one, the
    // adaptive wait's sleep slice (us) in the high 16 bits.
    etserve::StreamSelection selection;
    const auto bits = static_cast<uint32_t>(stream_mode);
    const uint32_t mode = bits & 0xff;
    const uint32_t wait = (bits >> 8) & 0xff;
    selection.sleep_slice_ns = static_cast<int64_t>(bits >> 16) * 1000;
    if (mode > 2 || wait > 2) {
      throw BridgeError("InvalidArgument", 0x12, "unknown stream mode");
    }
    selection.mode = static_cast<etserve::StreamMode>(mode);
    selection.wait = static_cast<etserve::CompletionWait>(wait);
    selection.handle = static_cast<uintptr_t>(stream);
    selection.device = device;

    // One copy out: each output goes from the Module's memory straight into a direct buffer
    // that Java hands out (OutputBuffers.allocate, usually a pooled one) and writes to the
    // response from; Java-owned, so it never aliases the Module once the call returns.
    struct JavaBuffers : etserve::OutputSink {
      JNIEnv* env;
      jintArray out_dtypes;
      jobjectArray out_shapes;
      jobject allocator;
      jmethodID allocate = nullptr;
      jobjectArray result = nullptr;
      void begin(size_t count) override {
        const auto m = static_cast<jsize>(count);
        if (out_dtypes == nullptr || out_shapes == nullptr || allocator == nullptr ||
            env->GetArrayLength(out_dtypes) < m || env->GetArrayLength(out_shapes) < m) {
          throw BridgeError("InvalidArgument", 0x12,
                            "output arrays too short (or no allocator) for " + std::to_string(m) + " outputs");
        }
        jclass allocator_class = env->GetObjectClass(allocator);
        allocate = env->GetMethodID(allocator_class, "allocate", "(IJ)Ljava/nio/ByteBuffer;");
        env->DeleteLocalRef(allocator_class);
        check(env);
        jclass buffer_class = env->FindClass("java/nio/ByteBuffer");
        check(env);
        result = env->NewObjectArray(m, buffer_class, nullptr);
        env->DeleteLocalRef(buffer_class);
        check(env);
      }
      void accept(size_t index, int dtype, const std::vector<int64_t>& sizes, const uint8_t* data,
                  size_t nbytes) override {
        const auto i = static_cast<jsize>(index);
        jobject buffer = env->CallObjectMethod(allocator, allocate, static_cast<jint>(i),
                                               static_cast<jlong>(nbytes));
        check(env);  // the allocator threw (OutOfMemoryError, for one)
        void* address = buffer == nullptr ? nullptr : env->GetDirectBufferAddress(buffer);
        const jlong capacity = buffer == nullptr ? -1 : env->GetDirectBufferCapacity(buffer);
        if (address == nullptr && nbytes > 0) {
          throw BridgeError("InvalidArgument", 0x12,
                            "the allocator gave output " + std::to_string(index) + " no direct buffer");
        }
        if (capacity < static_cast<jlong>(nbytes)) {
          throw BridgeError("InvalidArgument", 0x12,
                            "the allocator gave output " + std::to_string(index) + " " +
                                std::to_string(capacity) + " bytes for " + std::to_string(nbytes));
        }
        if (nbytes > 0) std::memcpy(address, data, nbytes);
        env->SetObjectArrayElement(result, i, buffer);
        env->DeleteLocalRef(buffer);
        jint dt = dtype;
        env->SetIntArrayRegion(out_dtypes, i, 1, &dt);
        jlongArray shape = to_java(env, sizes);
        env->SetObjectArrayElement(out_shapes, i, shape);
        env->DeleteLocalRef(shape);
      }
    } arrays;
    arrays.env = env;
    arrays.out_dtypes = out_dtypes;
    arrays.out_shapes = out_shapes;
    arrays.allocator = out_buffers;
    instance.execute(inputs, selection, arrays);
    jobjectArray result = arrays.result;
    return result;
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

}  // extern "C"
