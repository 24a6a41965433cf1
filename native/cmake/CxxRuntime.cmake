# Links a target against the shared C++ runtime (libstdc++.so.6), even where the toolchain or
# the environment (LDFLAGS=-static-libstdc++, a static-by-default compiler) would link a private
# copy into it. A library with its own copy of libstdc++ exports that copy's symbols; once
# ExecuTorch's CUDA delegate makes itself and its dependencies global (to let the AOTI model
# find the shims), every later lookup of a C++ runtime symbol in the process can bind to the
# wrong copy, and the JVM dies in the middle of a model load.
#
#   include(CxxRuntime)
#   etserve_link_shared_cxx_runtime(my_target)
include_guard(GLOBAL)

function(etserve_link_shared_cxx_runtime target)
  execute_process(COMMAND "${CMAKE_CXX_COMPILER}" -print-file-name=libstdc++.so
                  OUTPUT_VARIABLE runtime OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT IS_ABSOLUTE "${runtime}" OR NOT EXISTS "${runtime}")
    # A compiler built without a shared libstdc++ (static only): the system's, which the
    # ExecuTorch wheel's libraries load anyway.
    find_file(ETSERVE_SHARED_LIBSTDCXX NAMES libstdc++.so.6
              PATHS /usr/lib/x86_64-linux-gnu /usr/lib64 /lib/x86_64-linux-gnu /usr/lib NO_DEFAULT_PATH)
    set(runtime "${ETSERVE_SHARED_LIBSTDCXX}")
  endif()
  if(NOT runtime OR NOT EXISTS "${runtime}")
    message(FATAL_ERROR "no shared libstdc++ found (${CMAKE_CXX_COMPILER} names none, nor does the "
                        "system): the bridge and the delegates need the shared C++ runtime")
  endif()
  message(STATUS "${target}: C++ runtime ${runtime}")
  # Named before the compiler's own (possibly static) -lstdc++, so every symbol resolves here.
  target_link_libraries(${target} PRIVATE "${runtime}")
endfunction()
