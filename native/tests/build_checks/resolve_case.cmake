# One CallerStream.cmake case: configures probe_project in a fresh directory and checks the
# outcome. Run as `cmake -D... -P resolve_case.cmake` (see CMakeLists.txt for the cases).
#
#   WORK_DIR, PROBE_DIR, MODULE_DIR, INCLUDE_DIR, GENERATOR, MAKE_PROGRAM, CXX_COMPILER,
#   C_COMPILER, READELF, NM        where and with what to configure
#   LIBRARY                        the ETSERVE_CALLER_STREAM_LIBRARY value (may be empty)
#   EXECUTORCH_DIR                 optional: a (fake) ExecuTorch package config directory
#   EXECUTORCH_SOURCE_DIR          optional: a (synthetic) ExecuTorch checkout
#   PREDECLARE                     optional ON: declare the checkout's extension_cuda first
#   EXPECT                         accept | reject
#   EXPECT_MESSAGE                 reject: regex the configure output must match
#   EXPECT_SOURCE                  accept: checkout | override | wheel
#   EXPECT_SONAME                  accept: the soname a consumer must NEED; default: LIBRARY's
#                                  DT_SONAME, read here with readelf
#   EXPECT_UPSTREAM_HEADER         accept: ON | OFF
cmake_minimum_required(VERSION 3.28)

function(fail)
  string(JOIN "" text ${ARGN})
  message(FATAL_ERROR "${text}")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(configure "${CMAKE_COMMAND}" -S "${PROBE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}"
    "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}" "-DCMAKE_C_COMPILER=${C_COMPILER}"
    "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}" "-DETSERVE_CMAKE_MODULE_DIR=${MODULE_DIR}"
    "-DETSERVE_INCLUDE_DIR=${INCLUDE_DIR}" "-DETSERVE_CALLER_STREAM_LIBRARY=${LIBRARY}")
if(EXECUTORCH_DIR)
  list(APPEND configure "-Dexecutorch_DIR=${EXECUTORCH_DIR}")
endif()
if(EXECUTORCH_SOURCE_DIR)
  list(APPEND configure "-DEXECUTORCH_SOURCE_DIR=${EXECUTORCH_SOURCE_DIR}")
endif()
if(PREDECLARE)
  list(APPEND configure "-DPROBE_PREDECLARE_CHECKOUT=ON")
endif()
execute_process(COMMAND ${configure} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("---- configure output (exit ${rc})\n${out}${err}----")
# CMake wraps long messages over indented lines; compare them as one line.
string(REGEX REPLACE "[ \t\r\n]+" " " flat "${out}${err}")

if(EXPECT STREQUAL "reject")
  if(rc EQUAL 0)
    fail("configure succeeded, but the caller-stream library must be rejected")
  endif()
  if(NOT flat MATCHES "${EXPECT_MESSAGE}")
    fail("configure failed without the expected message: ${EXPECT_MESSAGE}")
  endif()
  if(LIBRARY)
    string(FIND "${flat}" "'${LIBRARY}'" at)
    if(at EQUAL -1)
      fail("the error does not name the rejected path '${LIBRARY}'")
    endif()
  endif()
  message(STATUS "rejected as expected")
  return()
endif()

if(NOT rc EQUAL 0)
  fail("configure failed, but the caller-stream library must be accepted")
endif()
if(NOT DEFINED EXPECT_SONAME)
  execute_process(COMMAND "${READELF}" -d "${LIBRARY}" OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT dynamic MATCHES "Library soname: \\[([^]]+)\\]")
    fail("cannot read the expected soname of ${LIBRARY}")
  endif()
  set(EXPECT_SONAME "${CMAKE_MATCH_1}")
endif()
if(EXPECT_SOURCE STREQUAL "checkout")
  set(expected_imported_soname "(built)")
else()
  set(expected_imported_soname "${EXPECT_SONAME}")
endif()
foreach(line "Caller-stream library: ${EXPECT_SOURCE}, "
             "probe: source=${EXPECT_SOURCE} "
             "probe: soname=${expected_imported_soname} "
             "probe: upstream-header=${EXPECT_UPSTREAM_HEADER} ")
  string(FIND "${flat}" "${line}" at)
  if(at EQUAL -1)
    fail("configure output lacks '${line}'")
  endif()
endforeach()

# Linking a consumer proves the target carries what compiling and linking need, and the
# consumer must name the library by its soname, not by the file it was linked from.
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("---- build output (exit ${rc})\n${out}${err}----")
if(NOT rc EQUAL 0)
  fail("the consumer of etserve::caller_stream does not build")
endif()
set(consumer "${WORK_DIR}/libprobe_consumer.so")
execute_process(COMMAND "${READELF}" -d "${consumer}" OUTPUT_VARIABLE dynamic)
string(FIND "${dynamic}" "Shared library: [${EXPECT_SONAME}]" at)
if(at EQUAL -1)
  fail("the consumer does not NEED ${EXPECT_SONAME}:\n${dynamic}")
endif()
execute_process(COMMAND "${NM}" -D --undefined-only "${consumer}" OUTPUT_VARIABLE imports)
if(NOT imports MATCHES " U _ZN10executorch9extension4cuda15getCallerStreamEv")
  fail("the consumer does not import getCallerStream:\n${imports}")
endif()
message(STATUS "accepted as expected: ${EXPECT_SOURCE}, consumer NEEDs ${EXPECT_SONAME}")
