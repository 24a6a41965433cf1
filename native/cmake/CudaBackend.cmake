# Finds ExecuTorch's CUDA/AOTI delegate (backend id CudaBackend) in the CUDA ExecuTorch wheel and
# decides which files the jar carries so the bridge can load it at run time.
#
#   include(CudaBackend)
#   etserve_resolve_cuda_backend()     # after find_package(executorch) and the caller stream
#
# Sources, first match wins:
#   1. ETSERVE_CUDA_BACKEND_LIBRARY: a prebuilt delegate library.
#   2. executorch::backend_cuda from the wheel's CMake package (lib/libexecutorch_backend_cuda.so).
#   3. The wheel's file layout: libexecutorch_backend_cuda.so beside libexecutorch.so.
# The PyPI (CPU) wheel has none: then nothing is staged and CudaBackend programs are refused
# at load with that reason.
#
# Sets, in the caller's scope:
#   ETSERVE_CUDA_BACKEND_SOURCE  override | wheel-package | wheel-layout | none
#   ETSERVE_CUDA_BACKEND_FILES   files to stage, in load order: the libraries the delegate needs
#                                from its own directory (the AOTI shims), then the delegate
#
# The delegate is accepted only if it resolves the runtime from the shared libexecutorch.so
# (a static copy would register into a second registry) and the caller stream from the one
# library the bridge links (a second copy breaks stream ordering silently), and defines no
# caller-stream API itself. The bridge never links it: loaded after the bridge, a delegate that
# cannot load on a host without CUDA costs that host only its CUDA programs.
include_guard(GLOBAL)
include("${CMAKE_CURRENT_LIST_DIR}/CallerStream.cmake")  # _etserve_find_binutil, the API's symbols

set(ETSERVE_CUDA_BACKEND_LIBRARY "" CACHE FILEPATH
    "Prebuilt ExecuTorch CUDA delegate (libexecutorch_backend_cuda.so); empty: from the wheel")

# NEEDED entries of an ELF shared object, as a list.
function(_etserve_needed out path)
  execute_process(COMMAND "${CMAKE_READELF}" -W --dynamic "${path}"
                  OUTPUT_VARIABLE dynamic ERROR_VARIABLE errors RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR errors MATCHES "Error:")
    message(FATAL_ERROR "CUDA delegate '${path}': readelf cannot read it (${errors}).")
  endif()
  string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]+\\]" lines "${dynamic}")
  set(names "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE ".*\\[([^]\n]+)\\]" "\\1" name "${line}")
    list(APPEND names "${name}")
  endforeach()
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

# Checks `delegate` and lists what to stage with it. `runtime_soname` is the shared runtime's
# soname (libexecutorch.so), `caller_stream_soname` the soname of the caller-stream library
# the bridge links. Usable in script mode (cmake -P): the build checks call it on stand-ins.
function(etserve_cuda_backend_files out delegate runtime_soname caller_stream_soname)
  set(what "CUDA delegate '${delegate}'")
  if(NOT EXISTS "${delegate}" OR IS_DIRECTORY "${delegate}")
    message(FATAL_ERROR "${what}: the file does not exist.")
  endif()
  _etserve_find_binutil(CMAKE_READELF readelf)
  _etserve_find_binutil(CMAKE_NM nm)
  _etserve_needed(needed "${delegate}")
  if(NOT runtime_soname IN_LIST needed)
    message(FATAL_ERROR "${what} does not link the shared runtime ${runtime_soname} "
                        "(NEEDED: ${needed}); a delegate with its own copy of the runtime "
                        "registers into a second registry and is never found.")
  endif()
  foreach(name IN LISTS needed)
    if(name MATCHES "extension_cuda" AND NOT name STREQUAL caller_stream_soname)
      message(FATAL_ERROR "${what} links the caller-stream library ${name}, but the bridge links "
                          "${caller_stream_soname}: two copies of the stream selection in one "
                          "process break stream ordering silently.")
    endif()
  endforeach()
  execute_process(COMMAND "${CMAKE_NM}" -D --defined-only "${delegate}"
                  OUTPUT_VARIABLE exports RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what}: nm cannot read its dynamic symbols.")
  endif()
  _etserve_caller_stream_constants()
  list(GET _ETSERVE_CALLER_STREAM_SYMBOLS 0 get_caller_stream)
  if(exports MATCHES "[TW] ${get_caller_stream}")
    message(FATAL_ERROR "${what} defines the caller-stream API itself: a second copy of the "
                        "stream selection.")
  endif()
  _etserve_check_no_private_cxx_runtime("${what}" "${exports}")
  # What it needs from its own directory (the AOTI shims), staged before it; the runtime and
  # the caller-stream library are staged already.
  get_filename_component(dir "${delegate}" DIRECTORY)
  set(files "")
  foreach(name IN LISTS needed)
    if(name STREQUAL runtime_soname OR name STREQUAL caller_stream_soname)
      continue()
    endif()
    if(EXISTS "${dir}/${name}")
      execute_process(COMMAND "${CMAKE_NM}" -D --defined-only "${dir}/${name}" OUTPUT_VARIABLE dep_exports)
      _etserve_check_no_private_cxx_runtime("${name}, which ${what} needs," "${dep_exports}")
      list(APPEND files "${dir}/${name}")
    elseif(name MATCHES "aoti")
      message(FATAL_ERROR "${what} needs ${name}, which is not beside it in ${dir}.")
    endif()
  endforeach()
  list(APPEND files "${delegate}")
  set(${out} "${files}" PARENT_SCOPE)
endfunction()

# A delegate (or a library staged with it) that exports a C++ runtime of its own (a static
# libstdc++) hands that copy to every library in the process once the delegate makes itself
# global for its AOTI models: lookups then mix two runtimes and the JVM crashes at model load.
function(_etserve_check_no_private_cxx_runtime what exports)
  foreach(symbol _ZNSt6locale7classicEv __cxa_allocate_exception)
    if(exports MATCHES "[TW] ${symbol}\n")
      message(FATAL_ERROR "${what} exports its own C++ runtime (${symbol}; libstdc++ linked "
                          "statically): link it against the shared libstdc++.so.6")
    endif()
  endforeach()
endfunction()

function(etserve_resolve_cuda_backend)
  get_target_property(runtime executorch::runtime IMPORTED_LOCATION)
  get_filename_component(runtime_dir "${runtime}" DIRECTORY)
  get_filename_component(runtime_name "${runtime}" NAME)
  get_target_property(caller_stream_soname etserve::caller_stream IMPORTED_SONAME)
  if(NOT caller_stream_soname)
    # Built from a checkout (not imported): extension/cuda's own library name.
    set(caller_stream_soname libextension_cuda.so)
  endif()

  set(source none)
  set(delegate "")
  if(ETSERVE_CUDA_BACKEND_LIBRARY)
    set(source override)
    set(delegate "${ETSERVE_CUDA_BACKEND_LIBRARY}")
  elseif(TARGET executorch::backend_cuda)
    set(source wheel-package)
    get_target_property(delegate executorch::backend_cuda IMPORTED_LOCATION)
  elseif(EXISTS "${runtime_dir}/libexecutorch_backend_cuda.so")
    set(source wheel-layout)
    set(delegate "${runtime_dir}/libexecutorch_backend_cuda.so")
  endif()

  set(files "")
  if(delegate)
    etserve_cuda_backend_files(files "${delegate}" "${runtime_name}" "${caller_stream_soname}")
    message(STATUS "etserve: CUDA delegate (${source}): ${files}")
  else()
    message(STATUS "etserve: no CUDA delegate in this ExecuTorch install; CudaBackend programs "
                   "will be refused at load")
  endif()
  set(ETSERVE_CUDA_BACKEND_SOURCE "${source}" PARENT_SCOPE)
  set(ETSERVE_CUDA_BACKEND_FILES "${files}" PARENT_SCOPE)
endfunction()
