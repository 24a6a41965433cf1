# Test-time fixtures for the build checks (the ctest fixture build_check.fixtures): builds the
# test-only binaries, then derives every other fixture under FIXTURES. Nothing here is committed.
# Inputs (-D): BUILD_DIR FIXTURE_TARGET FIXTURES REAL_LIBRARY BROKEN_BRIDGE STATIC_ARCHIVE
#   PIE_EXECUTABLE NON_PIE_EXECUTABLE WITHOUT_API PATCHELF STRIP READELF HEADER
#   CHECKOUT_TEMPLATE FAKE_WHEEL_CONFIG
cmake_minimum_required(VERSION 3.28)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fixture step failed (${rc}): ${ARGN}\n${out}")
  endif()
endfunction()

foreach(tool PATCHELF STRIP READELF)
  if(NOT EXISTS "${${tool}}")
    message(FATAL_ERROR "${tool} not found ('${${tool}}'); native/build.sh setup provides patchelf")
  endif()
endforeach()

# Copies a file to a path whose directory may not exist yet.
function(copy_to source destination)
  get_filename_component(directory "${destination}" DIRECTORY)
  file(MAKE_DIRECTORY "${directory}")
  file(COPY_FILE "${source}" "${destination}")
endfunction()

run("${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${FIXTURE_TARGET}")
file(REMOVE_RECURSE "${FIXTURES}")

# --- Libraries CallerStream.cmake must accept ---------------------------------------------
copy_to("${REAL_LIBRARY}" "${FIXTURES}/accept/caller-stream-library")

# --- Files it must reject, each under a name that looks right ------------------------------
set(reject "${FIXTURES}/reject")
copy_to("${STATIC_ARCHIVE}" "${reject}/static_archive/libextension_cuda.so")
file(WRITE "${reject}/linker_script/libextension_cuda.so"
     "/* GNU ld script: a text file, as libc.so is */\nGROUP ( ${REAL_LIBRARY} )\n")
copy_to("${NON_PIE_EXECUTABLE}" "${reject}/non_pie_executable/libextension_cuda.so")
copy_to("${PIE_EXECUTABLE}" "${reject}/pie_executable/libextension_cuda.so")
copy_to("${WITHOUT_API}" "${reject}/without_api/libextension_cuda.so")
file(MAKE_DIRECTORY "${reject}/directory/libextension_cuda.so")
file(MAKE_DIRECTORY "${reject}/truncated")
execute_process(COMMAND head -c 18 "${REAL_LIBRARY}"
                OUTPUT_FILE "${reject}/truncated/libextension_cuda.so")
file(SIZE "${reject}/truncated/libextension_cuda.so" truncated_size)
if(NOT truncated_size EQUAL 18)
  message(FATAL_ERROR "the truncated copy has ${truncated_size} bytes, not 18")
endif()

# --- The API header at ExecuTorch's path: the project's declaration, made self-contained ------
file(READ "${HEADER}" header)
set(upstream_switch "#if defined(ETSERVE_HAVE_UPSTREAM_CALLER_STREAM_HEADER)")
string(FIND "${header}" "${upstream_switch}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${HEADER} no longer contains '${upstream_switch}'")
endif()
string(REPLACE "${upstream_switch}" "#if 0  // stand-in for ExecuTorch's header: declare here"
       standin_header "${header}")

# --- A fake CUDA wheel: package config, the library under the wheel's soname, the header -----
function(make_fake_wheel root library)
  copy_to("${FAKE_WHEEL_CONFIG}" "${root}/executorch/share/cmake/executorch-config.cmake")
  copy_to("${library}" "${root}/executorch/lib/libexecutorch_extension_cuda.so")
  run("${PATCHELF}" --set-soname libexecutorch_extension_cuda.so
      "${root}/executorch/lib/libexecutorch_extension_cuda.so")
  file(WRITE "${root}/executorch/include/executorch/extension/cuda/caller_stream.h"
       "${standin_header}")
endfunction()
make_fake_wheel("${FIXTURES}/wheel" "${REAL_LIBRARY}")
make_fake_wheel("${FIXTURES}/wheel_without_api" "${WITHOUT_API}")

# --- A synthetic ExecuTorch checkout whose extension/cuda is the stand-in ------------------
set(checkout "${FIXTURES}/checkout/executorch")
file(COPY "${CHECKOUT_TEMPLATE}/extension" DESTINATION "${checkout}")
file(WRITE "${checkout}/extension/cuda/caller_stream.h" "${standin_header}")

# --- The broken bridge, stripped: only dynamic symbols remain --------------------------------
get_filename_component(broken_name "${BROKEN_BRIDGE}" NAME)
set(stripped "${FIXTURES}/stripped/${broken_name}")
copy_to("${BROKEN_BRIDGE}" "${stripped}")
run("${STRIP}" --strip-all "${stripped}")
execute_process(COMMAND "${READELF}" -SW "${stripped}" OUTPUT_VARIABLE sections)
if(sections MATCHES "\\.symtab")
  message(FATAL_ERROR "${stripped} still has .symtab after strip")
endif()

# --- The real package as the jar carries it, and the same with a second caller-stream copy ---
set(native_dir "META-INF/etserve/native/linux-x86_64")
run("${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${FIXTURES}/package/${native_dir}")
file(COPY "${FIXTURES}/package/META-INF" DESTINATION "${FIXTURES}/package_second_copy")
set(second_copy "${FIXTURES}/package_second_copy/${native_dir}/libexecutorch_extension_cuda.so")
copy_to("${REAL_LIBRARY}" "${second_copy}")
run("${PATCHELF}" --set-soname libexecutorch_extension_cuda.so "${second_copy}")
# ... and without it: the bridge's NEEDED entry then resolves nowhere.
file(COPY "${FIXTURES}/package/META-INF" DESTINATION "${FIXTURES}/package_without_caller_stream")
file(GLOB caller_stream_copies
     "${FIXTURES}/package_without_caller_stream/${native_dir}/lib*extension_cuda.so*")
if(NOT caller_stream_copies)
  message(FATAL_ERROR "the staged package has no lib*extension_cuda.so* to leave out")
endif()
file(REMOVE ${caller_stream_copies})
foreach(tree package package_second_copy)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E tar cf "${FIXTURES}/${tree}.jar" --format=zip
                          META-INF
                  WORKING_DIRECTORY "${FIXTURES}/${tree}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cannot zip ${FIXTURES}/${tree}.jar")
  endif()
endforeach()
# --- Layouts that mimic the CUDA wheel's lib/, with the stand-in delegate and shims ----------
# The stand-in is copied under the wheel's file name only inside these fixture directories.
function(make_cuda_wheel root)
  cmake_parse_arguments(PARSE_ARGV 1 arg "WITHOUT_SHIMS;PRIVATE_CXX_SHIMS" "" "PATCH")
  set(lib "${root}/executorch/lib")
  get_filename_component(shims_name "${STANDIN_AOTI_SHIMS}" NAME)
  if(arg_PRIVATE_CXX_SHIMS)
    copy_to("${STANDIN_AOTI_SHIMS_STATIC_CXX}" "${lib}/${shims_name}")
  elseif(NOT arg_WITHOUT_SHIMS)
    copy_to("${STANDIN_AOTI_SHIMS}" "${lib}/${shims_name}")
  endif()
  copy_to("${STANDIN_CUDA_BACKEND}" "${lib}/libexecutorch_backend_cuda.so")
  if(arg_PATCH)
    run("${PATCHELF}" ${arg_PATCH} "${lib}/libexecutorch_backend_cuda.so")
  endif()
endfunction()
make_cuda_wheel("${FIXTURES}/cuda_wheel")
make_cuda_wheel("${FIXTURES}/cuda_wheel_second_caller_stream"
                PATCH --replace-needed "${CALLER_STREAM_SONAME}" libexecutorch_extension_cuda.so)
make_cuda_wheel("${FIXTURES}/cuda_wheel_static_runtime" PATCH --remove-needed libexecutorch.so)
make_cuda_wheel("${FIXTURES}/cuda_wheel_without_shims" WITHOUT_SHIMS)
make_cuda_wheel("${FIXTURES}/cuda_wheel_private_cxx_runtime" PRIVATE_CXX_SHIMS)

# The real package plus a delegate and its delegates.list, as a CUDA-wheel build stages them.
function(make_package_with_delegate tree wheel)
  file(COPY "${FIXTURES}/package/META-INF" DESTINATION "${FIXTURES}/${tree}")
  set(dir "${FIXTURES}/${tree}/${native_dir}")
  get_filename_component(shims_name "${STANDIN_AOTI_SHIMS}" NAME)
  copy_to("${FIXTURES}/${wheel}/executorch/lib/${shims_name}" "${dir}/${shims_name}")
  copy_to("${FIXTURES}/${wheel}/executorch/lib/libexecutorch_backend_cuda.so"
          "${dir}/libexecutorch_backend_cuda.so")
  file(WRITE "${dir}/delegates.list" "${shims_name}\nlibexecutorch_backend_cuda.so\n")
endfunction()
make_package_with_delegate(package_with_cuda_delegate cuda_wheel)
make_package_with_delegate(package_with_second_stream_delegate cuda_wheel_second_caller_stream)

message(STATUS "build-check fixtures ready in ${FIXTURES}")
