# Runs the command after `--` and checks both its exit status and its output:
#   cmake -DEXPECT_EXIT=zero|nonzero [-DMATCH1=regex ... -DMATCH6=regex]
#         [-DNOMATCH1=regex -DNOMATCH2=regex] -P expect_command.cmake -- COMMAND ARGS...
# A must-fail case has to fail for the expected reason, not for any reason.
cmake_minimum_required(VERSION 3.28)

set(command "")
set(after_separator FALSE)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE ${last})
  if(after_separator)
    list(APPEND command "${CMAKE_ARGV${i}}")
  elseif(CMAKE_ARGV${i} STREQUAL "--")
    set(after_separator TRUE)
  endif()
endforeach()
if(NOT command)
  message(FATAL_ERROR "no command after --")
endif()

execute_process(COMMAND ${command} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("---- ${command} (exit ${rc})\n${out}${err}----")
set(output "${out}${err}")
# CMake wraps long messages at arbitrary spaces: match against single-spaced text.
string(REGEX REPLACE "[ \t\r\n]+" " " output "${output}")

if(EXPECT_EXIT STREQUAL "zero" AND NOT rc EQUAL 0)
  message(FATAL_ERROR "expected exit status 0, got ${rc}")
elseif(EXPECT_EXIT STREQUAL "nonzero" AND (rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$"))
  message(FATAL_ERROR "expected a non-zero exit status, got ${rc}")
elseif(NOT EXPECT_EXIT MATCHES "^(zero|nonzero)$")
  message(FATAL_ERROR "EXPECT_EXIT must be zero or nonzero")
endif()
foreach(n RANGE 1 6)
  if(DEFINED MATCH${n} AND NOT output MATCHES "${MATCH${n}}")
    message(FATAL_ERROR "output does not match: ${MATCH${n}}")
  endif()
endforeach()
foreach(n RANGE 1 2)
  if(DEFINED NOMATCH${n} AND output MATCHES "${NOMATCH${n}}")
    message(FATAL_ERROR "output must not match: ${NOMATCH${n}}")
  endif()
endforeach()
message(STATUS "as expected (exit ${rc})")
