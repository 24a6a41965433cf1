# Resolves ExecuTorch's caller-stream library (extension/cuda) into one imported target,
# etserve::caller_stream, so the bridge links exactly one copy of its thread-local selection.
#
#   include(CallerStream)
#   etserve_resolve_caller_stream()
#
# Sources, first match wins:
#   1. EXECUTORCH_SOURCE_DIR: an ExecuTorch checkout; its own extension/cuda target is built.
#   2. ETSERVE_CALLER_STREAM_LIBRARY: a prebuilt library (what native/build.sh passes).
#   3. executorch::extension_cuda from the CUDA ExecuTorch wheel (after find_package(executorch)).
# Sets ETSERVE_CALLER_STREAM_SOURCE (checkout|override|wheel) in the caller's scope.
# A prebuilt library is accepted only after reading it: a file that merely has the right name
# (an archive, a linker script, an executable, a truncated copy, a library without the API)
# would give the process a second copy of the selection, or none, and nothing would crash.
include_guard(GLOBAL)

set(ETSERVE_CALLER_STREAM_LIBRARY "" CACHE FILEPATH
    "Prebuilt ExecuTorch caller-stream library (libextension_cuda.so); empty: checkout or wheel")

# Set in every function that needs them: variables, unlike functions, are per directory.
macro(_etserve_caller_stream_constants)
  # Mangled names of the API: namespace executorch::extension::cuda, cudaStream_t = CUstream_st*.
  set(_ETSERVE_CALLER_STREAM_SYMBOLS
      _ZN10executorch9extension4cuda15getCallerStreamEv
      _ZN10executorch9extension4cuda17CallerStreamGuardC1EP11CUstream_st
      _ZN10executorch9extension4cuda17CallerStreamGuardD1Ev)
  # The header's path inside an include directory, for the checkout and the wheel alike.
  set(_ETSERVE_CALLER_STREAM_HEADER executorch/extension/cuda/caller_stream.h)
endmacro()

# Little-endian unsigned integer of `size` bytes at byte `offset` of a hex dump.
function(_etserve_hex_le_uint out hex offset size)
  set(value "")
  math(EXPR last "${offset} + ${size} - 1")
  foreach(byte RANGE ${last} ${offset} -1)
    math(EXPR pos "${byte} * 2")
    string(SUBSTRING "${hex}" ${pos} 2 pair)
    string(APPEND value "${pair}")
  endforeach()
  math(EXPR value "0x${value}")
  set(${out} ${value} PARENT_SCOPE)
endfunction()

function(_etserve_find_binutil var program)
  if(NOT ${var})
    find_program(${var} ${program})
  endif()
  if(NOT ${var})
    message(FATAL_ERROR "${program} is required to check the caller-stream library; "
                        "install binutils.")
  endif()
endfunction()

# Fails the configure, in one sentence, unless `path` is a loadable ELF shared object that
# exports the caller-stream API. `origin` says where the path came from. Sets `out_soname`.
function(_etserve_check_caller_stream_library out_soname path origin)
  _etserve_caller_stream_constants()
  set(what "${origin} '${path}' is not a usable caller-stream library")
  if(NOT EXISTS "${path}")
    message(FATAL_ERROR "${what}: the file does not exist.")
  endif()
  if(IS_DIRECTORY "${path}")
    message(FATAL_ERROR "${what}: it is a directory, not a regular file.")
  endif()
  # stat() size: also 0 for FIFOs and devices, so nothing below ever blocks reading one.
  file(SIZE "${path}" size)
  if(size LESS 64)
    message(FATAL_ERROR "${what}: it is ${size} bytes long, shorter than an ELF header "
                        "(truncated or not a shared object).")
  endif()

  file(READ "${path}" header LIMIT 64 HEX)
  string(SUBSTRING "${header}" 0 8 magic)
  if(NOT magic STREQUAL "7f454c46")
    message(FATAL_ERROR "${what}: it is not an ELF file (a static archive, a linker script "
                        "or other text has no ELF magic).")
  endif()
  string(SUBSTRING "${header}" 8 4 class_and_data)
  if(NOT class_and_data STREQUAL "0201")
    message(FATAL_ERROR "${what}: it is not a 64-bit little-endian ELF file.")
  endif()
  _etserve_hex_le_uint(e_type "${header}" 16 2)
  if(NOT e_type EQUAL 3)
    message(FATAL_ERROR "${what}: its ELF type is ${e_type}, not ET_DYN (3), so it is an "
                        "executable, an object file or a core dump, not a shared library.")
  endif()
  _etserve_hex_le_uint(e_machine "${header}" 18 2)
  set(expected_machine_x86_64 62)
  set(expected_machine_aarch64 183)
  set(expected_machine "${expected_machine_${CMAKE_SYSTEM_PROCESSOR}}")
  if(expected_machine AND NOT e_machine EQUAL expected_machine)
    message(FATAL_ERROR "${what}: it is built for ELF machine ${e_machine}, not for "
                        "${CMAKE_SYSTEM_PROCESSOR} (${expected_machine}).")
  endif()
  _etserve_hex_le_uint(e_phoff "${header}" 32 8)
  _etserve_hex_le_uint(e_phentsize "${header}" 54 2)
  _etserve_hex_le_uint(e_phnum "${header}" 56 2)
  math(EXPR phdr_end "${e_phoff} + ${e_phentsize} * ${e_phnum}")
  if(e_phnum EQUAL 0 OR phdr_end GREATER size)
    message(FATAL_ERROR "${what}: its program headers end at byte ${phdr_end} of a ${size}-byte "
                        "file (truncated or damaged).")
  endif()

  _etserve_find_binutil(CMAKE_READELF readelf)
  _etserve_find_binutil(CMAKE_NM nm)
  execute_process(COMMAND "${CMAKE_READELF}" -W --program-headers --dynamic "${path}"
                  OUTPUT_VARIABLE elf ERROR_VARIABLE elf_errors RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR elf_errors MATCHES "Error:")
    string(STRIP "${elf_errors}" elf_errors)
    message(FATAL_ERROR "${what}: readelf cannot read it (${elf_errors}).")
  endif()
  # A PIE executable is ET_DYN too; only an executable asks for a program interpreter.
  if(elf MATCHES "\n +INTERP ")
    message(FATAL_ERROR "${what}: it has a program interpreter (PT_INTERP), so it is an "
                        "executable, not a shared library.")
  endif()
  if(NOT elf MATCHES "\n +DYNAMIC ")
    message(FATAL_ERROR "${what}: it has no dynamic section (PT_DYNAMIC), so it cannot be "
                        "loaded as a shared library.")
  endif()
  if(NOT elf MATCHES "\\(SONAME\\)[^\n]*\\[([^]\n]+)\\]")
    message(FATAL_ERROR "${what}: it has no DT_SONAME, so the bridge would record its build "
                        "path instead of a name the loader can find.")
  endif()
  set(soname "${CMAKE_MATCH_1}")

  # Dynamic symbols only: .symtab (plain nm) is what a stripped library lacks, and a symbol
  # that is defined but hidden is no export.
  execute_process(COMMAND "${CMAKE_NM}" -D --defined-only "${path}"
                  OUTPUT_VARIABLE exports ERROR_VARIABLE nm_errors RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    string(STRIP "${nm_errors}" nm_errors)
    message(FATAL_ERROR "${what}: nm cannot read its dynamic symbols (${nm_errors}).")
  endif()
  foreach(symbol IN LISTS _ETSERVE_CALLER_STREAM_SYMBOLS)
    if(NOT exports MATCHES "(^|\n)[0-9a-fA-F]+ [TW] ${symbol}(@[^\n]*)?(\n|$)")
      message(FATAL_ERROR "${what}: it does not export ${symbol} from its dynamic symbol "
                          "table.")
    endif()
  endforeach()
  set(${out_soname} "${soname}" PARENT_SCOPE)
endfunction()

# etserve::caller_stream for a checked prebuilt file; `include_dir` holds the upstream header
# (empty: the project's declaration in etserve/caller_stream_api.h is used).
function(_etserve_import_caller_stream path soname include_dir)
  add_library(etserve::caller_stream SHARED IMPORTED GLOBAL)
  set_target_properties(etserve::caller_stream PROPERTIES
    IMPORTED_LOCATION "${path}"
    IMPORTED_SONAME "${soname}")
  if(include_dir)
    set_target_properties(etserve::caller_stream PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${include_dir}"
      INTERFACE_COMPILE_DEFINITIONS ETSERVE_HAVE_UPSTREAM_CALLER_STREAM_HEADER)
  endif()
endfunction()

function(_etserve_caller_stream_from_checkout)
  _etserve_caller_stream_constants()
  set(checkout "${EXECUTORCH_SOURCE_DIR}")
  if(NOT IS_DIRECTORY "${checkout}/extension/cuda"
     OR NOT EXISTS "${checkout}/extension/cuda/CMakeLists.txt")
    message(FATAL_ERROR "EXECUTORCH_SOURCE_DIR '${checkout}' is not an ExecuTorch checkout: "
                        "it has no extension/cuda/CMakeLists.txt.")
  endif()
  # Upstream's own name for the target (extension/cuda/CMakeLists.txt). A second declaration
  # means the tree is already part of this build, and building it again would give the
  # process two copies of the thread-local selection.
  if(TARGET extension_cuda)
    message(FATAL_ERROR "EXECUTORCH_SOURCE_DIR '${checkout}': a target named extension_cuda "
                        "is already declared in this build, so ExecuTorch's extension/cuda "
                        "would be declared a second time; link the existing target instead "
                        "of setting EXECUTORCH_SOURCE_DIR.")
  endif()
  # Headers are included as <executorch/...>, so the checkout directory must be named so.
  get_filename_component(checkout_name "${checkout}" NAME)
  get_filename_component(include_dir "${checkout}/.." ABSOLUTE)
  if(NOT checkout_name STREQUAL "executorch"
     OR NOT EXISTS "${include_dir}/${_ETSERVE_CALLER_STREAM_HEADER}")
    message(FATAL_ERROR "EXECUTORCH_SOURCE_DIR '${checkout}' must be a directory named "
                        "executorch that contains extension/cuda/caller_stream.h, because "
                        "its headers are included as <${_ETSERVE_CALLER_STREAM_HEADER}>.")
  endif()
  # What ExecuTorch's top-level CMakeLists would have set for its extension/cuda.
  if(NOT DEFINED EXECUTORCH_ROOT)
    set(EXECUTORCH_ROOT "${checkout}")
  endif()
  if(NOT DEFINED _common_include_directories)
    set(_common_include_directories "${include_dir}")
  endif()
  add_subdirectory("${checkout}/extension/cuda"
                   "${CMAKE_BINARY_DIR}/_deps/executorch_extension_cuda")
  if(NOT TARGET extension_cuda)
    message(FATAL_ERROR "EXECUTORCH_SOURCE_DIR '${checkout}': extension/cuda declared no "
                        "target named extension_cuda.")
  endif()
  get_target_property(type extension_cuda TYPE)
  if(NOT type STREQUAL "SHARED_LIBRARY")
    message(FATAL_ERROR "EXECUTORCH_SOURCE_DIR '${checkout}': extension_cuda is a ${type}, "
                        "not a shared library, so each linker of it would get its own copy.")
  endif()
  target_include_directories(extension_cuda INTERFACE "${include_dir}")
  target_compile_definitions(extension_cuda INTERFACE ETSERVE_HAVE_UPSTREAM_CALLER_STREAM_HEADER)
  add_library(etserve::caller_stream ALIAS extension_cuda)
endfunction()

function(etserve_resolve_caller_stream)
  _etserve_caller_stream_constants()
  if(TARGET etserve::caller_stream)
    message(FATAL_ERROR "etserve_resolve_caller_stream() was called twice: etserve::caller_stream "
                        "already exists.")
  endif()

  if(EXECUTORCH_SOURCE_DIR)
    if(NOT "${ETSERVE_CALLER_STREAM_LIBRARY}" STREQUAL "")
      message(WARNING "ETSERVE_CALLER_STREAM_LIBRARY is ignored: EXECUTORCH_SOURCE_DIR is set "
                      "and the checkout's extension/cuda is built instead.")
    endif()
    _etserve_caller_stream_from_checkout()
    set(source checkout)
    set(location "${EXECUTORCH_SOURCE_DIR}/extension/cuda (target extension_cuda)")

  elseif(NOT "${ETSERVE_CALLER_STREAM_LIBRARY}" STREQUAL "")
    set(location "${ETSERVE_CALLER_STREAM_LIBRARY}")
    _etserve_check_caller_stream_library(soname "${location}" ETSERVE_CALLER_STREAM_LIBRARY)
    _etserve_import_caller_stream("${location}" "${soname}" "")
    set(source override)

  elseif(TARGET executorch::extension_cuda)
    get_target_property(location executorch::extension_cuda IMPORTED_LOCATION)
    if(NOT location)
      get_target_property(configs executorch::extension_cuda IMPORTED_CONFIGURATIONS)
      list(GET configs 0 config)
      get_target_property(location executorch::extension_cuda IMPORTED_LOCATION_${config})
    endif()
    _etserve_check_caller_stream_library(soname "${location}" "executorch::extension_cuda")
    set(include_dir "")
    foreach(dir IN LISTS EXECUTORCH_INCLUDE_DIRS)
      if(EXISTS "${dir}/${_ETSERVE_CALLER_STREAM_HEADER}")
        set(include_dir "${dir}")
        break()
      endif()
    endforeach()
    if(NOT include_dir)
      message(FATAL_ERROR "The ExecuTorch package defines executorch::extension_cuda but none "
                          "of EXECUTORCH_INCLUDE_DIRS (${EXECUTORCH_INCLUDE_DIRS}) contains "
                          "${_ETSERVE_CALLER_STREAM_HEADER}.")
    endif()
    _etserve_import_caller_stream("${location}" "${soname}" "${include_dir}")
    set(source wheel)

  else()
    message(FATAL_ERROR
      "No ExecuTorch caller-stream library: set ETSERVE_CALLER_STREAM_LIBRARY to a prebuilt "
      "libextension_cuda.so (native/build.sh passes the one from its venv), or set "
      "EXECUTORCH_SOURCE_DIR to an ExecuTorch checkout to build its extension/cuda, or install "
      "the CUDA ExecuTorch wheel, whose package defines executorch::extension_cuda.")
  endif()

  message(STATUS "Caller-stream library: ${source}, ${location}")
  set(ETSERVE_CALLER_STREAM_SOURCE "${source}" PARENT_SCOPE)
endfunction()
